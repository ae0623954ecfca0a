package activities_test

import (
	"context"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/titles"
)

// newTitleModel starts a scripted model server and a title generator asking it.
func newTitleModel(t *testing.T) (*devmodel.Server, *titles.Generator) {
	t.Helper()
	model := devmodel.New(devmodel.Options{})
	require.NoError(t, model.Start(context.Background(), "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	g, err := titles.New(titles.Config{BaseURL: model.URL(), APIKey: "k", Model: "title-model"})
	require.NoError(t, err)
	return model, g
}

// renamingTitler is the owner renaming the Session while its title is generated.
type renamingTitler struct {
	inner  activities.Titler
	rename func()
	// generated is closed once the title is written (and about to be stored).
	generated chan struct{}
}

func (r renamingTitler) Title(ctx context.Context, c titles.Conversation) (string, error) {
	r.rename()
	defer close(r.generated)
	return r.inner.Title(ctx, c)
}

// TestAutomaticTitleFromAFirstResponse: with titles enabled, an untitled Session is
// titled through the model service from its first completed response, as one line of
// at most 200 characters.
func TestAutomaticTitleFromAFirstResponse(t *testing.T) {
	model, gen := newTitleModel(t)
	s := newStack(t)
	s.titles = gen
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, `Plan it [[script:text text="Release plan for v2\nwith details"]]`)
	s.waitEnded(id, "resp-"+in)
	s.eventually("an automatic title", func() bool { return s.session(id).Title != nil })
	sess := s.session(id)
	require.Equal(t, "Release plan for v2", *sess.Title)
	require.Equal(t, "auto", *sess.TitleSource)
	require.LessOrEqual(t, utf8.RuneCountInString(*sess.Title), titles.MaxLen)
	require.Len(t, model.Requests(), 1, "one title, asked once")
	require.Equal(t, "title-model", model.Requests()[0].Model)
}

// TestAutomaticTitleNeverReplacesTheOwners: a title the owner set before the first
// response is kept and no title is asked for; one set while the title is being
// generated is kept too.
func TestAutomaticTitleNeverReplacesTheOwners(t *testing.T) {
	model, gen := newTitleModel(t)
	s := newStack(t)
	before := s.newSession()
	during := s.newSession()
	generated := make(chan struct{})
	s.titles = renamingTitler{inner: gen, generated: generated, rename: func() {
		_, err := s.st.RenameSession(context.Background(), during, s.user.ID, "Owner's title")
		require.NoError(t, err)
	}}
	stop := s.startWorker("host-a-" + uniq())

	_, err := s.st.RenameSession(s.ctx, before, s.user.ID, "Set first")
	require.NoError(t, err)
	s.waitEnded(before, "resp-"+s.send(before, "quick"))

	s.waitEnded(during, "resp-"+s.send(during, `[[script:text text="Generated title"]]`))
	select {
	case <-generated:
	case <-s.ctx.Done():
		t.Fatal("no title was generated")
	}
	stop() // the Relay ends only after its title write, which outlives the stop
	for id, want := range map[string]string{before: "Set first", during: "Owner's title"} {
		sess := s.session(id)
		require.Equal(t, want, *sess.Title)
		require.Equal(t, "user", *sess.TitleSource)
	}
	require.Len(t, model.Requests(), 1, "a titled Session asks for no title")
}
