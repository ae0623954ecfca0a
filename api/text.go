package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// Text a user sends is stored exactly as sent, so text PostgreSQL cannot hold is refused
// at the edge instead of being altered or failing the write: invalid UTF-8 (which
// encoding/json would silently turn into U+FFFD) and the NUL character (which text and
// jsonb columns refuse).

const (
	msgInvalidUTF8 = "must be valid UTF-8"
	msgNUL         = "must not contain the NUL character (\\u0000)"
)

// textProblem says what is wrong with s as stored text, or "" when nothing is.
func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return msgInvalidUTF8
	case strings.IndexByte(s, 0) >= 0:
		return msgNUL
	}
	return ""
}

// checkJSONText walks a raw JSON body and refuses, naming the field, the first string
// (member name or value) whose raw bytes are not valid UTF-8 or whose decoded value
// holds a NUL. It checks the raw bytes because the decoder's replacement of invalid
// UTF-8 cannot be told apart afterwards. Malformed JSON is left to the decoder, which
// reports it with its position.
func checkJSONText(raw []byte, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var path jsonPath
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		end := dec.InputOffset()
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				path.push(v == '{')
			case '}', ']':
				path.pop()
				path.advance()
			}
		case string:
			isKey := path.expectsKey()
			// The span holds the token and the separators before it, which are ASCII.
			problem := ""
			if !utf8.Valid(raw[start:end]) {
				problem = msgInvalidUTF8
			} else if strings.IndexByte(v, 0) >= 0 {
				problem = msgNUL
			}
			if problem != "" {
				field := path.String(prefix)
				if isKey {
					return InvalidRequest(fieldOrBody(field), "a member name %s", problem)
				}
				return InvalidRequest(fieldOrBody(field), "%s", problem)
			}
			if isKey {
				path.setKey(v)
				continue
			}
			path.advance()
		default:
			path.advance()
		}
	}
}

func fieldOrBody(field string) string {
	if field == "" {
		return "body"
	}
	return field
}

// jsonPath tracks where a token walk is, to name fields as the API's messages do
// (config.mcp_servers[0].env.TOKEN).
type jsonPath struct {
	frames []jsonFrame
}

type jsonFrame struct {
	object bool
	key    string
	// keyNext: the next string token of an object is a member name.
	keyNext bool
	index   int
}

func (p *jsonPath) push(object bool) {
	p.frames = append(p.frames, jsonFrame{object: object, keyNext: object})
}

func (p *jsonPath) pop() {
	if len(p.frames) > 0 {
		p.frames = p.frames[:len(p.frames)-1]
	}
}

func (p *jsonPath) expectsKey() bool {
	return len(p.frames) > 0 && p.frames[len(p.frames)-1].keyNext
}

func (p *jsonPath) setKey(k string) {
	top := &p.frames[len(p.frames)-1]
	top.key, top.keyNext = k, false
}

// advance moves past one value of the enclosing container.
func (p *jsonPath) advance() {
	if len(p.frames) == 0 {
		return
	}
	top := &p.frames[len(p.frames)-1]
	if top.object {
		top.keyNext = true
		return
	}
	top.index++
}

// String names the value being read, or the object whose member name is being read.
func (p *jsonPath) String(prefix string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(prefix, "."))
	for _, f := range p.frames {
		switch {
		case !f.object:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		case !f.keyNext:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
	}
	return b.String()
}

// checkRequestText refuses a path parameter or query value that is not storable text:
// they are used as keys and filters in queries.
func (s *Server) checkRequestText(c *gin.Context) {
	for _, p := range c.Params {
		if problem := textProblem(p.Value); problem != "" {
			s.fail(c, InvalidRequest(p.Key, "%s", problem))
			return
		}
	}
	for key, values := range c.Request.URL.Query() {
		for _, v := range append([]string{key}, values...) {
			if problem := textProblem(v); problem != "" {
				s.fail(c, InvalidRequest(fieldOrBody(key), "%s", problem))
				return
			}
		}
	}
	c.Next()
}

// headerText returns a header used as a key, trimmed, refusing text that cannot be
// stored.
func headerText(c *gin.Context, name string) (string, error) {
	v := strings.TrimSpace(c.GetHeader(name))
	if problem := textProblem(v); problem != "" {
		return "", InvalidRequest(name, "%s", problem)
	}
	return v, nil
}
