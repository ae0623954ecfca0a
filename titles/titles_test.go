package titles_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/titles"
)

func TestLineIsOneShortLine(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Fix the login bug", titles.Line("\n  \"Fix the   login bug.\"\nSecond line"))
	long := titles.Line(strings.Repeat("word ", 100))
	require.LessOrEqual(t, utf8.RuneCountInString(long), titles.MaxLen)
	require.NotContains(t, long, "\n")
	require.Empty(t, titles.Line(" \n\t"))
}

// TestTitleFromTheScriptedModelServer asks the scripted model server, which answers
// the directive in the person's message, for a title.
func TestTitleFromTheScriptedModelServer(t *testing.T) {
	t.Parallel()
	model := devmodel.New(devmodel.Options{})
	require.NoError(t, model.Start(context.Background(), "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	g, err := titles.New(titles.Config{BaseURL: model.URL(), APIKey: "k", Model: "title-model"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	got, err := g.Title(ctx, titles.Conversation{Message: `Plan the release [[script:text text="Release plan for v2.\nmore"]]`, Reply: "Here is a plan."})
	require.NoError(t, err)
	require.Equal(t, "Release plan for v2", got)
	reqs := model.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "title-model", reqs[0].Model)

	_, err = g.Title(ctx, titles.Conversation{Message: `[[script:error status=500]]`})
	require.ErrorContains(t, err, "HTTP 500")
}
