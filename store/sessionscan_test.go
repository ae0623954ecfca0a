package store

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm/schema"
)

// The hot reads scan a Session by hand: a column added to the model must be added to
// sessionColumns and sessionFields too, in the same place.
func TestSessionColumnsNameEveryFieldOfTheModelInOrder(t *testing.T) {
	sch, err := schema.Parse(&Session{}, &sync.Map{}, schema.NamingStrategy{})
	require.NoError(t, err)
	assert.Equal(t, sch.DBNames, selectedNames(sessionColumns))

	var x Session
	fields := sessionFields(&x)
	require.Len(t, fields, len(sch.Fields))
	model := reflect.ValueOf(&x).Elem()
	for i, f := range sch.Fields {
		assert.Equal(t, model.FieldByName(f.Name).Addr().Pointer(), reflect.ValueOf(fields[i]).Pointer(),
			"column %s scans into another field", f.DBName)
	}
}

// selectedNames are the names of the columns a select list gives: an expression's
// alias, or a column's name without its table.
func selectedNames(list string) []string {
	var names []string
	depth, start := 0, 0
	for i := 0; i <= len(list); i++ {
		switch {
		case i < len(list) && list[i] == '(':
			depth++
		case i < len(list) && list[i] == ')':
			depth--
		case i == len(list) || (list[i] == ',' && depth == 0):
			item := strings.TrimSpace(list[start:i])
			if _, alias, found := strings.Cut(item, " AS "); found {
				item = alias
			}
			if _, column, qualified := strings.Cut(item, "."); qualified {
				item = column
			}
			names = append(names, item)
			start = i + 1
		}
	}
	return names
}
