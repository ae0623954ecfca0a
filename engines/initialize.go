package engines

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// InitializeRuntimeClient checks a freshly activated client before ActivateRuntime
// returns it, and returns its manifest. It checks that the client is live, reports the
// adapter's engine kind, has a vendor conversation key, resumed the requested
// conversation when resumeSessionKey is set (a saved Session must never be bound to a
// new or empty vendor conversation), and declares exactly the permission modes the
// adapter registered.
func InitializeRuntimeClient(ctx context.Context, client RuntimeClient, registered EngineRuntimeCapabilities, resumeSessionKey string) (EngineCapabilityManifest, error) {
	if client == nil {
		return EngineCapabilityManifest{}, errors.New("initialize runtime client: nil client")
	}
	if !client.IsLive() {
		return EngineCapabilityManifest{}, errors.New("initialize runtime client: client is not live")
	}
	if got := client.EngineKind(); got != registered.EngineKind {
		return EngineCapabilityManifest{}, fmt.Errorf("initialize runtime client: engine kind %q, registered %q", got, registered.EngineKind)
	}
	key := client.EngineSessionKey()
	if key == "" {
		return EngineCapabilityManifest{}, errors.New("initialize runtime client: client has no engine session key")
	}
	if resumeSessionKey != "" && key != resumeSessionKey {
		return EngineCapabilityManifest{}, fmt.Errorf("initialize runtime client: resumed conversation %q, requested %q", key, resumeSessionKey)
	}
	manifest, err := client.Capabilities(ctx)
	if err != nil {
		return EngineCapabilityManifest{}, fmt.Errorf("initialize runtime client: read capabilities: %w", err)
	}
	if manifest.EngineKind != registered.EngineKind {
		return EngineCapabilityManifest{}, fmt.Errorf("initialize runtime client: manifest engine kind %q, registered %q", manifest.EngineKind, registered.EngineKind)
	}
	if !sameSet(manifest.PermissionModes, registered.PermissionModes) {
		return EngineCapabilityManifest{}, fmt.Errorf("initialize runtime client: permission modes %v differ from registered %v", manifest.PermissionModes, registered.PermissionModes)
	}
	if len(manifest.InputContentTypes) == 0 {
		return EngineCapabilityManifest{}, errors.New("initialize runtime client: manifest lists no input content types")
	}
	return manifest, nil
}

func sameSet(a, b []string) bool {
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(slices.Compact(as), slices.Compact(bs))
}
