package workflows

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Workflow code imports only the Temporal SDK, the activities (typed method
// references and payloads) and the standard library's pure packages: never the
// store, GORM, zap or network packages.
func TestWorkflowCodeImportsOnlyTheSDKAndActivities(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	allowed := func(p string) bool {
		switch {
		case strings.HasPrefix(p, "go.temporal.io/sdk/"),
			p == "github.com/astrabox/astrabox/activities",
			p == "errors", p == "time", p == "fmt", p == "strings":
			return true
		}
		return false
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			require.Truef(t, allowed(p), "%s imports %s", f, p)
		}
	}
}
