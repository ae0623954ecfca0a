package engines

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every *ValidationError.
var ErrInvalid = errors.New("invalid")

// Problem is one validation failure: the field it concerns and what is wrong.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every problem found in one subject: an adapter registration, an
// Agent configuration or a RuntimeProfile. Its message names the subject and each
// problem, so a failed start-up says which adapter is wrong and why.
type ValidationError struct {
	// Subject names what was validated, e.g. `engine adapter "claude" (*claude.Adapter)`.
	Subject  string    `json:"subject"`
	Problems []Problem `json:"problems"`
}

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Field == "" {
			parts[i] = p.Message
		} else {
			parts[i] = p.Field + ": " + p.Message
		}
	}
	return e.Subject + ": " + strings.Join(parts, "; ")
}

// Is matches ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// HasField reports whether a problem concerns field (exactly, or a member of it).
func (e *ValidationError) HasField(field string) bool {
	for _, p := range e.Problems {
		if p.Field == field || strings.HasPrefix(p.Field, field+".") || strings.HasPrefix(p.Field, field+"[") {
			return true
		}
	}
	return false
}

// problems collects validation problems for one subject.
type problems struct {
	subject string
	list    []Problem
}

func (p *problems) add(field, format string, args ...any) {
	p.list = append(p.list, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p *problems) addErr(field string, err error) {
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		p.list = append(p.list, Problem{Field: field, Message: line})
	}
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Subject: p.subject, Problems: p.list}
}

// checkUnique reports empty and repeated names in a list.
func (p *problems) checkUnique(field string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		if n == "" {
			p.add(fmt.Sprintf("%s[%d]", field, i), "is empty")
		} else if seen[n] {
			p.add(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", n)
		}
		seen[n] = true
	}
}
