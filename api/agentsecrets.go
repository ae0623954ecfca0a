package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/store"
)

// RedactedSecret is shown in place of every secret value of an Agent's config: the
// env values and headers of its MCP servers. Sent back unchanged on update, it keeps
// the stored value.
const RedactedSecret = "[redacted]"

// The members of an MCP server whose values are secret.
const (
	mcpServersKey = "mcp_servers"
	mcpNameKey    = "name"
	mcpEnvKey     = "env"
	mcpHeadersKey = "headers"
)

// secretRef is one secret value's place in an Agent's config.
type secretRef struct {
	server int    // index in mcp_servers
	name   string // the server's name, stable across reordering
	member string // env or headers
	key    string
}

// pointer is the value's RFC 6901 JSON pointer, the key of store.AgentSecrets.
func (r secretRef) pointer() string {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	return fmt.Sprintf("/%s/%d/%s/%s", mcpServersKey, r.server, r.member, esc.Replace(r.key))
}

// field names the value in API messages.
func (r secretRef) field() string {
	return fmt.Sprintf("config.%s[%d].%s.%s", mcpServersKey, r.server, r.member, r.key)
}

// forEachSecret calls fn with every secret value of a decoded config and a setter
// replacing it. The config has passed strict validation, so members have their types;
// anything else is skipped.
func forEachSecret(doc map[string]any, fn func(ref secretRef, value string, set func(string)) error) error {
	servers, _ := doc[mcpServersKey].([]any)
	for i, s := range servers {
		server, _ := s.(map[string]any)
		name, _ := server[mcpNameKey].(string)
		for _, member := range []string{mcpEnvKey, mcpHeadersKey} {
			values, _ := server[member].(map[string]any)
			for key, v := range values {
				value, ok := v.(string)
				if !ok {
					continue
				}
				set := func(nv string) { values[key] = nv }
				if err := fn(secretRef{server: i, name: name, member: member, key: key}, value, set); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func decodeConfigDoc(config json.RawMessage) (map[string]any, error) {
	doc := map[string]any{}
	if len(config) == 0 {
		return doc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode agent config: %w", err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	return doc, nil
}

// redactConfig returns config with every secret value replaced by RedactedSecret. The
// stored config already holds markers; redacting again also hides values saved before
// secrets were sealed.
func redactConfig(config json.RawMessage) (json.RawMessage, error) {
	doc, err := decodeConfigDoc(config)
	if err != nil {
		return nil, err
	}
	changed := false
	_ = forEachSecret(doc, func(_ secretRef, value string, set func(string)) error {
		if value != RedactedSecret {
			set(RedactedSecret)
			changed = true
		}
		return nil
	})
	if !changed {
		return config, nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode agent config: %w", err)
	}
	return out, nil
}

// priorSecrets resolves a marker sent back on update to the value the Agent keeps for
// the same server name, member and key.
type priorSecrets struct {
	config json.RawMessage
	// load reads the Agent's sealed values; called only when a marker is sent back.
	load   func() (store.AgentSecrets, error)
	values map[secretRef]string
}

func (p *priorSecrets) lookup(ref secretRef) (string, bool, error) {
	if p == nil {
		return "", false, nil
	}
	if p.values == nil {
		sealed, err := p.load()
		if err != nil {
			return "", false, err
		}
		doc, err := decodeConfigDoc(p.config)
		if err != nil {
			return "", false, err
		}
		p.values = map[secretRef]string{}
		_ = forEachSecret(doc, func(r secretRef, value string, _ func(string)) error {
			if v, ok := sealed[r.pointer()]; ok {
				value = v
			}
			// A value saved before secrets were sealed is in the config itself.
			if value != RedactedSecret {
				p.values[secretRef{name: r.name, member: r.member, key: r.key}] = value
			}
			return nil
		})
	}
	v, ok := p.values[secretRef{name: ref.name, member: ref.member, key: ref.key}]
	return v, ok, nil
}

// separateSecrets takes the secret values out of a validated config: it returns the
// config to store, with RedactedSecret in their place, and the values to seal. A
// marker sent back keeps the prior value (prior is nil on creation).
func separateSecrets(config json.RawMessage, prior *priorSecrets) (json.RawMessage, store.AgentSecrets, error) {
	doc, err := decodeConfigDoc(config)
	if err != nil {
		return nil, nil, err
	}
	secrets := store.AgentSecrets{}
	err = forEachSecret(doc, func(ref secretRef, value string, set func(string)) error {
		if value == RedactedSecret {
			kept, ok, err := prior.lookup(ref)
			if err != nil {
				return err
			}
			if !ok {
				return InvalidRequest(ref.field(), "is the redaction marker %q, but the Agent keeps no value for server %q's %s %q: send the value", RedactedSecret, ref.name, ref.member, ref.key)
			}
			value = kept
		}
		secrets[ref.pointer()] = value
		set(RedactedSecret)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("encode agent config: %w", err)
	}
	return out, secrets, nil
}
