package devmodel

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// directiveOpen starts a script directive inside prompt text.
const directiveOpen = "[[script:"

// directive is a parsed `[[script:NAME key=value ...]]` from a prompt. Values may
// be bare words, "double quoted" (with \" and \\ escapes) or `backquoted`. A key
// may repeat (bash takes several cmd= for a multi-step turn); a key without a
// value is a flag set to "true".
type directive struct {
	name string
	raw  string
	args map[string][]string
}

// findDirective returns the last directive in text, and the text with every
// directive removed. ok is false when text holds none; a malformed directive is
// an error so a typo shows up in the reply instead of silently running the default.
func findDirective(text string) (d directive, rest string, ok bool, err error) {
	var kept strings.Builder
	remaining := text
	for {
		start := strings.Index(remaining, directiveOpen)
		if start < 0 {
			kept.WriteString(remaining)
			break
		}
		kept.WriteString(remaining[:start])
		parsed, length, perr := parseDirective(remaining[start:])
		if perr != nil {
			return directive{}, text, false, perr
		}
		d, ok = parsed, true
		remaining = remaining[start+length:]
	}
	return d, strings.TrimSpace(kept.String()), ok, nil
}

// parseDirective parses one directive at the start of s and returns its length.
func parseDirective(s string) (directive, int, error) {
	i := len(directiveOpen)
	nameEnd := i
	for nameEnd < len(s) && isWordByte(s[nameEnd]) {
		nameEnd++
	}
	if nameEnd == i {
		return directive{}, 0, fmt.Errorf("script directive without a name")
	}
	d := directive{name: strings.ToLower(s[i:nameEnd]), args: map[string][]string{}}
	i = nameEnd
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
		if i >= len(s) {
			return directive{}, 0, fmt.Errorf("script directive %q is not closed with ]]", d.name)
		}
		if strings.HasPrefix(s[i:], "]]") {
			i += 2
			d.raw = s[:i]
			return d, i, nil
		}
		keyStart := i
		for i < len(s) && isWordByte(s[i]) {
			i++
		}
		if keyStart == i {
			return directive{}, 0, fmt.Errorf("script directive %q: unexpected %q", d.name, s[i:i+1])
		}
		key := strings.ToLower(s[keyStart:i])
		if i >= len(s) || s[i] != '=' {
			d.args[key] = append(d.args[key], "true")
			continue
		}
		i++
		value, n, err := parseValue(s[i:])
		if err != nil {
			return directive{}, 0, fmt.Errorf("script directive %q, argument %s: %w", d.name, key, err)
		}
		d.args[key] = append(d.args[key], value)
		i += n
	}
}

// parseValue reads one argument value and returns it with the bytes consumed.
func parseValue(s string) (string, int, error) {
	if s == "" {
		return "", 0, fmt.Errorf("missing value")
	}
	switch s[0] {
	case '`':
		end := strings.IndexByte(s[1:], '`')
		if end < 0 {
			return "", 0, fmt.Errorf("unterminated backquote")
		}
		return s[1 : 1+end], end + 2, nil
	case '"':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				if i+1 >= len(s) {
					return "", 0, fmt.Errorf("dangling backslash")
				}
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(s[i])
				}
			case '"':
				return b.String(), i + 1, nil
			default:
				b.WriteByte(s[i])
			}
		}
		return "", 0, fmt.Errorf("unterminated double quote")
	default:
		i := 0
		for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && !strings.HasPrefix(s[i:], "]]") {
			i++
		}
		return s[:i], i, nil
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// str returns the last value of key, or def.
func (d directive) str(key, def string) string {
	if v := d.args[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// all returns every value of key in order.
func (d directive) all(key string) []string { return d.args[key] }

// integer returns key as an int, or def when absent.
func (d directive) integer(key string, def int) (int, error) {
	v := d.str(key, "")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("argument %s=%q is not an integer", key, v)
	}
	return n, nil
}

// duration returns key as a duration; a bare number means milliseconds.
func (d directive) duration(key string, def time.Duration) (time.Duration, error) {
	v := d.str(key, "")
	if v == "" {
		return def, nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("argument %s=%q is not a duration", key, v)
	}
	return dur, nil
}

// Directive writes a `[[script:NAME key=value ...]]` directive for a prompt,
// quoting each value so the server reads it back unchanged; kv alternates keys
// and values (a key may repeat, as cmd does for a multi-step bash script).
// Tests of other packages use it instead of hand-quoting shell commands:
//
//	devmodel.Directive("bash", "cmd", `echo "hi" > out.txt`)
func Directive(name string, kv ...string) string {
	if len(kv)%2 != 0 {
		panic("devmodel.Directive: keys and values must come in pairs")
	}
	var b strings.Builder
	b.WriteString(directiveOpen + name)
	for i := 0; i < len(kv); i += 2 {
		b.WriteString(" " + kv[i] + "=" + quoteValue(kv[i+1]))
	}
	b.WriteString("]]")
	return b.String()
}

// quoteValue double-quotes v with the escapes parseValue understands.
func quoteValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(v) + `"`
}
