package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoSecretsKey: secret values were to be stored or read, but the store was opened
// without a secrets key (secrets.key).
var ErrNoSecretsKey = errors.New("no secrets key configured")

// AgentSecrets are an Agent's secret values, keyed by the RFC 6901 JSON pointer of
// their place in the Agent's config (/mcp_servers/0/env/TOKEN). The config holds a
// redaction marker there; only GetAgentRuntimeConfig puts the values back.
type AgentSecrets map[string]string

// secretsKeyLen is the AES-256 key length.
const secretsKeyLen = 32

// sealer encrypts secret values with AES-256-GCM. Each sealed value is bound to its row
// by additional data, so a ciphertext copied onto another row does not open.
type sealer struct {
	aead cipher.AEAD
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) == 0 {
		return nil, nil
	}
	if len(key) != secretsKeyLen {
		return nil, fmt.Errorf("secrets key: want %d bytes, got %d", secretsKeyLen, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// sealAgentSecrets returns the column value for secrets of the Agent id: nil for none.
func (s *Store) sealAgentSecrets(agentID string, secrets AgentSecrets) ([]byte, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	if s.sealer == nil {
		return nil, fmt.Errorf("seal agent secrets: %w", ErrNoSecretsKey)
	}
	plain, err := json.Marshal(secrets)
	if err != nil {
		return nil, fmt.Errorf("seal agent secrets: %w", err)
	}
	nonce := make([]byte, s.sealer.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal agent secrets: read random: %w", err)
	}
	return s.sealer.aead.Seal(nonce, nonce, plain, []byte("agent:"+agentID)), nil
}

// openAgentSecrets opens an Agent's sealed secrets column.
func (s *Store) openAgentSecrets(a Agent) (AgentSecrets, error) {
	if len(a.SealedSecrets) == 0 {
		return AgentSecrets{}, nil
	}
	if s.sealer == nil {
		return nil, fmt.Errorf("open secrets of agent %s: %w", a.ID, ErrNoSecretsKey)
	}
	n := s.sealer.aead.NonceSize()
	if len(a.SealedSecrets) < n {
		return nil, fmt.Errorf("open secrets of agent %s: sealed value too short", a.ID)
	}
	plain, err := s.sealer.aead.Open(nil, a.SealedSecrets[:n], a.SealedSecrets[n:], []byte("agent:"+a.ID))
	if err != nil {
		return nil, fmt.Errorf("open secrets of agent %s (was secrets.key changed?): %w", a.ID, err)
	}
	var out AgentSecrets
	if err := json.Unmarshal(plain, &out); err != nil {
		return nil, fmt.Errorf("open secrets of agent %s: %w", a.ID, err)
	}
	return out, nil
}

// GetAgentSecrets returns an Agent's secret values, decrypted. They are for the
// platform's own use (carrying them into the Agent's box, keeping them across an
// update); the API never shows them.
func (s *Store) GetAgentSecrets(ctx context.Context, id string) (AgentSecrets, error) {
	a, err := s.GetAgentByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.openAgentSecrets(a)
}

// GetAgentRuntimeConfig returns an Agent's config with its secret values in place of
// their redaction markers, for the platform to hand to the Agent program. Never show
// it to a user.
func (s *Store) GetAgentRuntimeConfig(ctx context.Context, id string) (json.RawMessage, error) {
	a, err := s.GetAgentByID(ctx, id)
	if err != nil {
		return nil, err
	}
	secrets, err := s.openAgentSecrets(a)
	if err != nil {
		return nil, err
	}
	if len(secrets) == 0 {
		return a.Config, nil
	}
	var doc any
	if err := json.Unmarshal(a.Config, &doc); err != nil {
		return nil, fmt.Errorf("agent %s runtime config: %w", id, err)
	}
	for pointer, value := range secrets {
		if err := setJSONPointer(doc, pointer, value); err != nil {
			return nil, fmt.Errorf("agent %s runtime config: %w", id, err)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("agent %s runtime config: %w", id, err)
	}
	return out, nil
}

// setJSONPointer replaces the string at pointer (RFC 6901) inside doc, which holds
// only maps and slices from json.Unmarshal into any.
func setJSONPointer(doc any, pointer, value string) error {
	tokens := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	if !strings.HasPrefix(pointer, "/") || len(tokens) == 0 {
		return fmt.Errorf("secret pointer %q is not a JSON pointer", pointer)
	}
	node := doc
	for i, raw := range tokens {
		tok := strings.NewReplacer("~1", "/", "~0", "~").Replace(raw)
		last := i == len(tokens)-1
		switch n := node.(type) {
		case map[string]any:
			if _, ok := n[tok]; !ok {
				return fmt.Errorf("secret pointer %q leads nowhere in the config", pointer)
			}
			if last {
				n[tok] = value
				return nil
			}
			node = n[tok]
		case []any:
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || idx >= len(n) {
				return fmt.Errorf("secret pointer %q leads nowhere in the config", pointer)
			}
			if last {
				n[idx] = value
				return nil
			}
			node = n[idx]
		default:
			return fmt.Errorf("secret pointer %q leads nowhere in the config", pointer)
		}
	}
	return nil
}
