package engines

import (
	"bytes"
	"context"
	"fmt"
)

// InstallVerifiedTextScript publishes an executable text file in the box and reads it
// back to verify the bytes landed unchanged, so a later exec never runs a partial or
// stale script. Pass the EngineStartupContext's RuntimeIdentity and a runtime-visible
// path: the box maps workspace paths to their backing location for cold and prepared
// placements alike, so the adapter must not convert them. A nil identity explicitly
// addresses the box filesystem; an incomplete supplied identity is refused before any
// write.
func InstallVerifiedTextScript(ctx context.Context, box Box, identity *RuntimeIdentity, path, text string) error {
	if identity != nil {
		if err := identity.Validate(); err != nil {
			return fmt.Errorf("install script %s: %w", path, err)
		}
	}
	want := []byte(text)
	if err := box.WriteFile(ctx, identity, path, want, 0o755); err != nil {
		return fmt.Errorf("install script %s: %w", path, err)
	}
	got, err := box.ReadFile(ctx, identity, path)
	if err != nil {
		return fmt.Errorf("verify script %s: %w", path, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("verify script %s: read back %d bytes that differ from the %d written", path, len(got), len(want))
	}
	return nil
}
