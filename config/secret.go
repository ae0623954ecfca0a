package config

import "encoding/json"

// redacted is what a Secret prints in place of its value.
const redacted = "[redacted]"

// Secret holds a credential (a database password, a token, a model key). Every
// printing path (fmt verbs, JSON, zap's Stringer handling) shows "[redacted]", so a
// Secret can sit in a logged struct or an error message without leaking; Reveal is
// the one explicit way to read it.
type Secret string

// Reveal returns the secret's value. Call it only where the value is used, never
// to build a message.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret has a value.
func (s Secret) IsSet() bool { return s != "" }

// String implements fmt.Stringer with the redacted form.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer so %#v is redacted too.
func (s Secret) GoString() string { return s.String() }

// MarshalJSON writes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText writes the redacted form (used by YAML and text encoders).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
