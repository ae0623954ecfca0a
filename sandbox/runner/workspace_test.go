package runner

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// A failed upload is reported once the workspace holds none of it: neither the
// files before the failure nor anything staged.
func TestFailedUploadLeavesNothingOnceReported(t *testing.T) {
	dir := t.TempDir()
	_, c := startRunner(t, dir)
	ctx := testContext(t)
	cut := errors.New("the sender's body broke off")
	for i := range 20 { // each round races the runner's clean-up against the answer
		_, err := c.UploadWorkspace(ctx, sandboxtest.UploadFiles(
			sandbox.UploadFile{Path: "first.txt", Body: strings.NewReader("one")},
			sandbox.UploadFile{Path: "docs/second.txt", Body: iotest.ErrReader(cut)},
		))
		require.ErrorIs(t, err, cut, "round %d: the source's own error", i)
		for _, sub := range []string{".", "docs"} {
			entries, err := os.ReadDir(dir + "/" + sub)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			require.NoError(t, err)
			for _, e := range entries {
				require.NotContains(t, e.Name(), ".astrabox-upload", "round %d", i)
				require.NotContains(t, e.Name(), "first.txt", "round %d", i)
			}
		}
	}
}
