package engines

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// CanonicalFrameJSON returns a stored frame's canonical encoding, the bytes
// Frame.MarshalJSON gives ("type" first, the other members in key order, compact),
// and its type, without building a Frame. The stream sends every part in this
// encoding, and PostgreSQL's jsonb gives frames back with its own key order and
// spacing; parsing each into a map to encode it again was the API's largest cost per
// streamed part. A frame whose member names need escaping or repeat takes the Frame
// path; the result is the same.
func CanonicalFrameJSON(data []byte) ([]byte, string, error) {
	if out, typ, ok := canonicalFast(data); ok {
		return out, typ, nil
	}
	f, err := ParseFrame(data)
	if err != nil {
		return nil, "", err
	}
	out, err := f.MarshalJSON()
	if err != nil {
		return nil, "", err
	}
	return out, f.Type(), nil
}

// objectMember is one top-level member of a JSON object: its name as written
// (without quotes) and its value's bytes.
type objectMember struct {
	name  []byte
	value []byte
}

// canonicalFast encodes an object whose member names are plain (printable ASCII,
// nothing json.Marshal would escape) and distinct, with a string "type" free of
// escapes or invalid UTF-8 (which Frame.Type would decode); ok is false for anything
// else, valid or not.
func canonicalFast(data []byte) (out []byte, typ string, ok bool) {
	var stack [16]objectMember
	members, ok := plainMembers(data, stack[:0])
	if !ok || len(members) == 0 {
		return nil, "", false
	}
	slices.SortFunc(members, func(a, b objectMember) int {
		aType, bType := string(a.name) == "type", string(b.name) == "type"
		switch {
		case aType && !bType:
			return -1
		case bType && !aType:
			return 1
		}
		return bytes.Compare(a.name, b.name)
	})
	if string(members[0].name) != "type" {
		return nil, "", false
	}
	t := bytes.TrimSpace(members[0].value)
	if len(t) < 3 || t[0] != '"' || t[len(t)-1] != '"' || bytes.IndexByte(t, '\\') >= 0 || !utf8.Valid(t) {
		return nil, "", false
	}
	buf := bytes.NewBuffer(make([]byte, 0, len(data)))
	buf.WriteByte('{')
	for k, m := range members {
		if k > 0 {
			if bytes.Equal(m.name, members[k-1].name) {
				return nil, "", false
			}
			buf.WriteByte(',')
		}
		buf.WriteByte('"')
		buf.Write(m.name)
		buf.WriteString(`":`)
		if err := json.Compact(buf, m.value); err != nil {
			return nil, "", false
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), string(t[1 : len(t)-1]), true
}

// plainMembers appends the members of the JSON object data to members, in the order
// written, when every member name is plain (printable ASCII that json.Marshal would
// not escape); ok is false for anything else. It finds each value's extent without
// checking the value: callers compact it, or know it valid.
func plainMembers(data []byte, members []objectMember) (_ []objectMember, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return members, skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, false
		}
		start := i + 1
		end := bytes.IndexByte(data[start:], '"')
		if end < 0 || !plainName(data[start:start+end]) {
			return nil, false
		}
		i = start + end
		name := data[start:i]
		i = skipSpace(data, i+1)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		vstart := skipSpace(data, i+1)
		end, found := valueEnd(data, vstart)
		if !found {
			return nil, false
		}
		members = append(members, objectMember{name: name, value: data[vstart:end]})
		i = end
		if data[i] == '}' {
			break
		}
		i = skipSpace(data, i+1)
	}
	if skipSpace(data, i+1) != len(data) {
		return nil, false
	}
	return members, true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// valueEnd finds the ',' or '}' that ends the member value starting at i: the first
// one outside strings and nested arrays and objects. The value itself is checked by
// json.Compact afterwards.
func valueEnd(data []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case ']':
			depth--
		case '}':
			if depth == 0 {
				return i, true
			}
			depth--
		case ',':
			if depth == 0 {
				return i, true
			}
		}
		if depth < 0 {
			return 0, false
		}
	}
	return 0, false
}
