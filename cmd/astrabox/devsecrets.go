package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/astrabox/astrabox/config"
)

// devSecretsKeyFile keeps the dev stack's secrets.key in its data folder, so Agents'
// secret values saved in one run open in the next.
const devSecretsKeyFile = "secrets.key"

// devSecretsKey returns the dev stack's secrets key: the one in dataDir, or a new
// random one written there (mode 0600) on first start.
func devSecretsKey(dataDir string) (config.Secret, error) {
	path := filepath.Join(dataDir, devSecretsKeyFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		return config.Secret(strings.TrimSpace(string(raw))), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read dev secrets key: %w", err)
	}
	key := make([]byte, config.SecretsKeyLen)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate dev secrets key: %w", err)
	}
	encoded := base64.StdEncoding.EncodeToString(key)
	if err := os.WriteFile(path, []byte(encoded+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write dev secrets key: %w", err)
	}
	return config.Secret(encoded), nil
}
