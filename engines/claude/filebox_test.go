package claude_test

import (
	"context"
	"errors"
	"net"
	"os"

	"github.com/astrabox/astrabox/engines"
)

// fileBox is a box of files only.
type fileBox struct{ files map[string][]byte }

func (b *fileBox) ID() string { return "files" }
func (b *fileBox) StartProcess(context.Context, engines.ProcessSpec) (engines.ProcessSession, error) {
	return nil, errors.New("no processes")
}
func (b *fileBox) ReadFile(_ context.Context, _ *engines.RuntimeIdentity, p string) ([]byte, error) {
	d, ok := b.files[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return d, nil
}
func (b *fileBox) WriteFile(_ context.Context, _ *engines.RuntimeIdentity, p string, d []byte, _ uint32) error {
	b.files[p] = d
	return nil
}
func (b *fileBox) DialPort(context.Context, int) (net.Conn, error) {
	return nil, errors.New("no ports")
}
