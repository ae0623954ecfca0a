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
	var columns []string
	for _, c := range strings.Split(sessionColumns, ",") {
		columns = append(columns, strings.TrimPrefix(strings.TrimSpace(c), "s."))
	}
	assert.Equal(t, sch.DBNames, columns)

	var x Session
	fields := sessionFields(&x)
	require.Len(t, fields, len(sch.Fields))
	model := reflect.ValueOf(&x).Elem()
	for i, f := range sch.Fields {
		assert.Equal(t, model.FieldByName(f.Name).Addr().Pointer(), reflect.ValueOf(fields[i]).Pointer(),
			"column %s scans into another field", f.DBName)
	}
}
