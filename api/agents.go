package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// maxNameLen caps Agent and RuntimeProfile names.
const maxNameLen = 200

// agentView is an Agent as the API shows it. Config is shown, with its secret values
// redacted, to the Agent's creator and to administrators only; other members see null.
type agentView struct {
	AgentID          string          `json:"agent_id"`
	Name             string          `json:"name"`
	Description      string          `json:"description"`
	EngineKind       string          `json:"engine_kind"`
	RuntimeProfileID string          `json:"runtime_profile_id"`
	Config           json.RawMessage `json:"config"`
	PermissionMode   *string         `json:"permission_mode"`
	Version          int64           `json:"version"`
	CreatedBy        *string         `json:"created_by"`
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
}

func newAgentView(a store.Agent, user store.User) (agentView, error) {
	v := agentView{
		AgentID: a.ID, Name: a.Name, Description: a.Description, EngineKind: a.EngineKind,
		RuntimeProfileID: a.RuntimeProfileID, PermissionMode: a.PermissionMode,
		Version: a.Version, CreatedBy: a.CreatedBy, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(),
	}
	if !canManageAgent(user, a) {
		return v, nil
	}
	config, err := redactConfig(a.Config)
	if err != nil {
		return agentView{}, fmt.Errorf("agent %s: %w", a.ID, err)
	}
	v.Config = config
	return v, nil
}

// canManageAgent reports whether user may read an Agent's configuration and change
// it: its creator and administrators. Every member may list Agents and start Sessions
// from them.
func canManageAgent(user store.User, a store.Agent) bool {
	return user.IsAdmin() || (a.CreatedBy != nil && *a.CreatedBy == user.ID)
}

// writeAgent answers with the Agent as user may see it.
func (s *Server) writeAgent(c *gin.Context, a store.Agent) {
	v, err := newAgentView(a, currentUser(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, v)
}

// agentRequest is the body of Agent creation and update. Version is required on update
// only: a stale version is refused with 409 CONFLICT.
type agentRequest struct {
	Name             *string         `json:"name"`
	Description      *string         `json:"description"`
	RuntimeProfileID *string         `json:"runtime_profile_id"`
	Config           json.RawMessage `json:"config"`
	PermissionMode   *string         `json:"permission_mode"`
	Version          *int64          `json:"version"`
}

func (s *Server) createAgent(c *gin.Context) {
	var req agentRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if req.Version != nil {
		s.fail(c, InvalidRequest("version", "is set by the server on creation"))
		return
	}
	if err := requiredString("name", req.Name); err != nil {
		s.fail(c, err)
		return
	}
	if err := requiredString("runtime_profile_id", req.RuntimeProfileID); err != nil {
		s.fail(c, err)
		return
	}
	name, err := cleanName("name", *req.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	profile, adapter, err := s.offeredProfile(c, *req.RuntimeProfileID)
	if err != nil {
		s.fail(c, err)
		return
	}
	config, err := s.validateAgentSettings(adapter, req.Config, req.PermissionMode)
	if err != nil {
		s.fail(c, err)
		return
	}
	config, secrets, err := separateSecrets(config, nil)
	if err != nil {
		s.fail(c, err)
		return
	}
	user := currentUser(c)
	in := store.NewAgent{Name: name, EngineKind: profile.EngineKind, RuntimeProfileID: profile.ID, Config: config, Secrets: secrets, CreatedBy: &user.ID}
	if req.Description != nil {
		in.Description = *req.Description
	}
	if req.PermissionMode != nil && *req.PermissionMode != "" {
		in.PermissionMode = req.PermissionMode
	}
	agent, err := s.store.CreateAgent(c.Request.Context(), in)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeAgent(c, agent)
}

func (s *Server) listAgents(c *gin.Context) {
	agents, err := s.store.ListAgents(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	user := currentUser(c)
	out := make([]agentView, len(agents))
	for i, a := range agents {
		if out[i], err = newAgentView(a, user); err != nil {
			s.fail(c, err)
			return
		}
	}
	writeOK(c, out)
}

func (s *Server) getAgent(c *gin.Context) {
	agent, err := s.loadAgent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeAgent(c, agent)
}

func (s *Server) updateAgent(c *gin.Context) {
	agent, err := s.loadAgent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !canManageAgent(currentUser(c), agent) {
		s.fail(c, forbidden("only the Agent's creator or an administrator can change it"))
		return
	}
	var req agentRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if req.Version == nil {
		s.fail(c, InvalidRequest("version", "is required: send the version you read"))
		return
	}
	upd := store.AgentUpdate{Description: req.Description}
	if req.Name != nil {
		name, err := cleanName("name", *req.Name)
		if err != nil {
			s.fail(c, err)
			return
		}
		upd.Name = &name
	}
	profile, adapter, err := s.updatedProfile(c, agent, req.RuntimeProfileID)
	if err != nil {
		s.fail(c, err)
		return
	}
	// A new profile may select another engine: the kept config and mode are checked
	// against it too.
	config, mode := req.Config, req.PermissionMode
	if config == nil {
		config = agent.Config
	}
	if mode == nil && agent.PermissionMode != nil && profile.EngineKind != agent.EngineKind {
		mode = agent.PermissionMode
	}
	validConfig, err := s.validateAgentSettings(adapter, config, mode)
	if err != nil {
		s.fail(c, err)
		return
	}
	if req.Config != nil || profile.EngineKind != agent.EngineKind {
		ctx := c.Request.Context()
		prior := &priorSecrets{config: agent.Config, load: func() (store.AgentSecrets, error) { return s.store.GetAgentSecrets(ctx, agent.ID) }}
		upd.Config, upd.Secrets, err = separateSecrets(validConfig, prior)
		if err != nil {
			s.fail(c, err)
			return
		}
	}
	upd.PermissionMode = req.PermissionMode
	if req.RuntimeProfileID != nil {
		upd.RuntimeProfileID = &profile.ID
		upd.EngineKind = &profile.EngineKind
	}
	saved, err := s.store.UpdateAgent(c.Request.Context(), agent.ID, *req.Version, upd)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeAgent(c, saved)
}

// updatedProfile returns the RuntimeProfile an updated Agent selects, and its adapter. A
// newly selected one must be offered; the Agent's current one is kept even when it was
// disabled since, so other fields stay editable, but its Agent program must still be
// installed to check the configuration.
func (s *Server) updatedProfile(c *gin.Context, agent store.Agent, newID *string) (store.RuntimeProfile, engines.EngineAdapter, error) {
	if newID != nil && *newID != agent.RuntimeProfileID {
		return s.offeredProfile(c, *newID)
	}
	profile, err := s.store.GetRuntimeProfileByID(c.Request.Context(), agent.RuntimeProfileID)
	if err != nil {
		return store.RuntimeProfile{}, nil, err
	}
	adapter, err := s.profileAdapter(profile)
	if err != nil {
		return store.RuntimeProfile{}, nil, InvalidRequest("runtime_profile_id", "the Agent program %q of RuntimeProfile %q is not installed", profile.EngineKind, profile.Name)
	}
	return profile, adapter, nil
}

// loadAgent returns the path's Agent.
func (s *Server) loadAgent(c *gin.Context) (store.Agent, error) {
	id := c.Param("agent_id")
	if !isUUID(id) {
		return store.Agent{}, NotFound("agent " + id)
	}
	agent, err := s.store.GetAgentByID(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Agent{}, NotFound("agent " + id)
	}
	return agent, err
}

// offeredProfile returns a RuntimeProfile an Agent may select, and its adapter: it
// exists, is enabled, and its Agent program is installed and supports Agents.
func (s *Server) offeredProfile(c *gin.Context, id string) (store.RuntimeProfile, engines.EngineAdapter, error) {
	if !isUUID(id) {
		return store.RuntimeProfile{}, nil, InvalidRequest("runtime_profile_id", "no RuntimeProfile %q exists", id)
	}
	profile, err := s.store.GetRuntimeProfileByID(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.RuntimeProfile{}, nil, InvalidRequest("runtime_profile_id", "no RuntimeProfile %q exists", id)
	}
	if err != nil {
		return store.RuntimeProfile{}, nil, err
	}
	adapter, offered := s.profileOffered(profile)
	if !profile.Enabled {
		return store.RuntimeProfile{}, nil, InvalidRequest("runtime_profile_id", "RuntimeProfile %q is disabled", profile.Name)
	}
	if !offered {
		return store.RuntimeProfile{}, nil, InvalidRequest("runtime_profile_id", "the Agent program %q of RuntimeProfile %q is not installed or does not support Agents", profile.EngineKind, profile.Name)
	}
	return profile, adapter, nil
}

// profileOffered reports whether the profile's Agent program is installed and drives
// Agent conversations, with its adapter; enabled is checked separately.
func (s *Server) profileOffered(p store.RuntimeProfile) (engines.EngineAdapter, bool) {
	adapter, err := s.profileAdapter(p)
	if err != nil {
		return nil, false
	}
	return adapter, adapter.Capabilities().SupportsSessionKind(engines.SessionKindAgentChat)
}

// profileAdapter is the adapter that runs a RuntimeProfile's Sessions: the installed
// program of its engine kind, or the ACP program it defines (engines.Registry.ProfileAdapter).
func (s *Server) profileAdapter(p store.RuntimeProfile) (engines.EngineAdapter, error) {
	return s.registry.ProfileAdapter(p.EngineKind, p.ACPProgram)
}

// agentAdapter is the adapter that runs an Agent's Sessions, its RuntimeProfile's.
func (s *Server) agentAdapter(ctx context.Context, agent store.Agent) (engines.EngineAdapter, error) {
	profile, err := s.store.GetRuntimeProfileByID(ctx, agent.RuntimeProfileID)
	if err != nil {
		return nil, fmt.Errorf("load runtime profile of agent %s: %w", agent.ID, err)
	}
	return s.profileAdapter(profile)
}

// validateAgentSettings checks an Agent's configuration and permission mode against
// the declarations of the adapter that runs it and returns the configuration to store
// (compact JSON).
func (s *Server) validateAgentSettings(adapter engines.EngineAdapter, config json.RawMessage, mode *string) (json.RawMessage, error) {
	caps := adapter.Capabilities()
	if len(config) == 0 || string(config) == "null" {
		config = json.RawMessage(`{}`)
	}
	var cfg engines.AgentConfig
	if err := decodeStrict(config, &cfg, "config."); err != nil {
		return nil, err
	}
	if err := engines.ValidateAgentConfigOf(adapter, cfg); err != nil {
		return nil, engines.NestProblems(err, "config")
	}
	if mode != nil && *mode != "" && !caps.HasPermissionMode(*mode) {
		return nil, InvalidRequest("permission_mode", "%q is not a permission mode of %s (accepted: %s)", *mode, caps.EngineKind, fmtList(caps.PermissionModes))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, config); err != nil {
		return nil, InvalidRequest("config", "is not valid JSON")
	}
	return compact.Bytes(), nil
}

// cleanName trims a name and refuses an empty, multi-line or overlong one.
func cleanName(field, name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", InvalidRequest(field, "must not be empty")
	case strings.ContainsAny(name, "\r\n"):
		return "", InvalidRequest(field, "must be one line")
	case utf8.RuneCountInString(name) > maxNameLen:
		return "", InvalidRequest(field, "must be at most %d characters", maxNameLen)
	}
	return name, nil
}
