package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// DefaultSandboxBackends are the sandbox backends a RuntimeProfile may select when the
// server is not told otherwise: the embedded local (bubblewrap) backend, which runs
// long-lived process sessions, has no isolated sessions in a shared box, and runs a box
// without an image on the host system.
func DefaultSandboxBackends() map[string]engines.SandboxBackendCapabilities {
	return map[string]engines.SandboxBackendCapabilities{
		store.SandboxLocal: {SupportsProcessSessions: true, RunsHostSystem: true},
	}
}

// BackendOffer is what RuntimeProfiles may rely on from a sandbox backend that
// declares caps; runsImages says it pulls image references.
func BackendOffer(caps sandbox.Capabilities, runsImages bool) engines.SandboxBackendCapabilities {
	return engines.SandboxBackendCapabilities{SupportsProcessSessions: caps.ProcessSessions,
		SupportsIsolatedSessions: caps.IsolatedSessions, RunsImageReferences: runsImages}
}

// profileView is a RuntimeProfile as the API shows it. Offered is true when Agents may
// select it: enabled, with an installed Agent program that supports Agents.
type profileView struct {
	RuntimeProfileID string          `json:"runtime_profile_id"`
	Name             string          `json:"name"`
	EngineKind       string          `json:"engine_kind"`
	Image            string          `json:"image"`
	Enabled          bool            `json:"enabled"`
	Offered          bool            `json:"offered"`
	SandboxBackend   string          `json:"sandbox_backend"`
	SandboxTenancy   string          `json:"sandbox_tenancy"`
	Resources        json.RawMessage `json:"resources"`
	NetworkPolicy    json.RawMessage `json:"network_policy"`
	Tracing          json.RawMessage `json:"tracing"`
	PrewarmSize      int             `json:"prewarm_size"`
	// ACPProgram is the Agent program a profile of the generic ACP kind defines; null
	// on every other profile.
	ACPProgram json.RawMessage `json:"acp_program"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

func (s *Server) newProfileView(p store.RuntimeProfile) profileView {
	_, supported := s.profileOffered(p)
	return profileView{
		RuntimeProfileID: p.ID, Name: p.Name, EngineKind: p.EngineKind, Image: p.Image, Enabled: p.Enabled,
		Offered: p.Enabled && supported, SandboxBackend: p.SandboxBackend, SandboxTenancy: p.SandboxTenancy,
		Resources: p.Resources, NetworkPolicy: p.NetworkPolicy, Tracing: p.Tracing, PrewarmSize: p.PrewarmSize,
		ACPProgram: p.ACPProgram, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
	}
}

// profileRequest is the body of RuntimeProfile creation and update; EngineKind is
// accepted on creation only. ACPProgram, on a profile of the generic ACP kind only,
// replaces the whole program definition.
type profileRequest struct {
	Name           *string         `json:"name"`
	EngineKind     *string         `json:"engine_kind"`
	Image          *string         `json:"image"`
	Enabled        *bool           `json:"enabled"`
	SandboxBackend *string         `json:"sandbox_backend"`
	SandboxTenancy *string         `json:"sandbox_tenancy"`
	Resources      json.RawMessage `json:"resources"`
	NetworkPolicy  json.RawMessage `json:"network_policy"`
	Tracing        json.RawMessage `json:"tracing"`
	PrewarmSize    *int            `json:"prewarm_size"`
	ACPProgram     json.RawMessage `json:"acp_program"`
}

// profileSpec is a RuntimeProfile's settings after a request is applied.
type profileSpec struct {
	name, engineKind, image, backend, tenancy     string
	resources, networkPolicy, tracing, acpProgram json.RawMessage
	prewarm                                       int
}

func (s *Server) createProfile(c *gin.Context) {
	if err := requireAdmin(c); err != nil {
		s.fail(c, err)
		return
	}
	var req profileRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	for _, required := range []struct {
		field string
		value *string
	}{{"name", req.Name}, {"engine_kind", req.EngineKind}, {"sandbox_backend", req.SandboxBackend}} {
		if err := requiredString(required.field, required.value); err != nil {
			s.fail(c, err)
			return
		}
	}
	spec := profileSpec{engineKind: *req.EngineKind, backend: *req.SandboxBackend, tenancy: store.TenancyConversation}
	if err := s.applyProfileRequest(&spec, req); err != nil {
		s.fail(c, err)
		return
	}
	enabled := true
	if req.Enabled != nil {
		enabled = *req.Enabled
	}
	p, err := s.store.CreateRuntimeProfile(c.Request.Context(), store.NewRuntimeProfile{
		Name: spec.name, EngineKind: spec.engineKind, Image: spec.image, Enabled: enabled,
		SandboxBackend: spec.backend, SandboxTenancy: spec.tenancy, Resources: spec.resources,
		NetworkPolicy: spec.networkPolicy, Tracing: spec.tracing, PrewarmSize: spec.prewarm, ACPProgram: spec.acpProgram,
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, s.newProfileView(p))
}

func (s *Server) updateProfile(c *gin.Context) {
	if err := requireAdmin(c); err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.loadProfile(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var req profileRequest
	if err := decodeBody(c, s.maxBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	if req.EngineKind != nil {
		s.fail(c, InvalidRequest("engine_kind", "cannot change; create another RuntimeProfile"))
		return
	}
	if req.Enabled != nil {
		s.fail(c, InvalidRequest("enabled", "changes through the enable and disable operations"))
		return
	}
	spec := profileSpec{name: p.Name, engineKind: p.EngineKind, image: p.Image, backend: p.SandboxBackend, tenancy: p.SandboxTenancy,
		resources: p.Resources, networkPolicy: p.NetworkPolicy, tracing: p.Tracing, acpProgram: p.ACPProgram, prewarm: p.PrewarmSize}
	if err := s.applyProfileRequest(&spec, req); err != nil {
		s.fail(c, err)
		return
	}
	saved, err := s.store.UpdateRuntimeProfile(c.Request.Context(), p.ID, store.RuntimeProfileUpdate{
		Name: &spec.name, Image: &spec.image, SandboxBackend: &spec.backend, SandboxTenancy: &spec.tenancy,
		Resources: spec.resources, NetworkPolicy: spec.networkPolicy, Tracing: spec.tracing, PrewarmSize: &spec.prewarm,
		ACPProgram: req.acpProgramUpdate(spec),
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, s.newProfileView(saved))
}

// applyProfileRequest merges the request into spec and validates the result against
// the engine registry and the sandbox backend's capabilities.
func (s *Server) applyProfileRequest(spec *profileSpec, req profileRequest) error {
	if req.Name != nil {
		name, err := cleanName("name", *req.Name)
		if err != nil {
			return err
		}
		spec.name = name
	}
	if req.Image != nil {
		spec.image = *req.Image
	}
	if req.SandboxBackend != nil {
		spec.backend = *req.SandboxBackend
	}
	if req.SandboxTenancy != nil {
		spec.tenancy = *req.SandboxTenancy
	}
	for _, doc := range []struct {
		field string
		raw   json.RawMessage
	}{{"resources", req.Resources}, {"network_policy", req.NetworkPolicy}} {
		if doc.raw == nil {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(doc.raw, &obj); err != nil || obj == nil {
			return InvalidRequest(doc.field, "must be a JSON object")
		}
	}
	if req.Resources != nil {
		spec.resources = req.Resources
	}
	if req.NetworkPolicy != nil {
		spec.networkPolicy = req.NetworkPolicy
	}
	var tracing engines.TracingConfig
	if req.Tracing != nil {
		if err := decodeStrict(req.Tracing, &tracing, "tracing."); err != nil {
			return err
		}
		spec.tracing, _ = json.Marshal(tracing)
	} else if len(spec.tracing) > 0 {
		_ = json.Unmarshal(spec.tracing, &tracing)
	}
	if req.PrewarmSize != nil {
		if *req.PrewarmSize < 0 {
			return InvalidRequest("prewarm_size", "must not be negative")
		}
		spec.prewarm = *req.PrewarmSize
	}
	// A null acp_program is left out, as a null field is everywhere: on creation there
	// is then none, which the registry refuses where a program is required.
	if req.ACPProgram != nil && string(req.ACPProgram) != "null" {
		var compact bytes.Buffer
		if err := json.Compact(&compact, req.ACPProgram); err != nil {
			return InvalidRequest("acp_program", "is not valid JSON")
		}
		spec.acpProgram = compact.Bytes()
	}
	adapter, err := s.profileAdapter(store.RuntimeProfile{EngineKind: spec.engineKind, ACPProgram: spec.acpProgram})
	if errors.Is(err, engines.ErrNotInstalled) {
		return InvalidRequest("engine_kind", "no Agent program %q is installed", spec.engineKind)
	}
	if err != nil {
		// The registry names the definition engines.ProgramField; the request acp_program.
		return renameProblems(err, engines.ProgramField, "acp_program")
	}
	backend, ok := s.sandboxBackends[spec.backend]
	if !ok {
		names := make([]string, 0, len(s.sandboxBackends))
		for n := range s.sandboxBackends {
			names = append(names, n)
		}
		slices.Sort(names)
		return InvalidRequest("sandbox_backend", "%q is not an available sandbox backend (available: %s)", spec.backend, fmtList(names))
	}
	return engines.ValidateRuntimeProfileOf(adapter, engines.RuntimeProfileSpec{
		EngineKind: spec.engineKind, RuntimeImage: spec.image, SandboxTenancy: engines.SandboxTenancy(spec.tenancy),
		Tracing: tracing, Backend: backend,
	})
}

// acpProgramUpdate is the program an update stores: the request's, when it sends one
// (nil keeps the stored one).
func (req profileRequest) acpProgramUpdate(spec profileSpec) json.RawMessage {
	if req.ACPProgram == nil {
		return nil
	}
	return spec.acpProgram
}

// renameProblems renames the field from of an *engines.ValidationError's problems, and
// its members, to to; other errors are returned as they are.
func renameProblems(err error, from, to string) error {
	var invalid *engines.ValidationError
	if errors.As(err, &invalid) {
		for i, p := range invalid.Problems {
			if p.Field == from || strings.HasPrefix(p.Field, from+".") {
				invalid.Problems[i].Field = to + strings.TrimPrefix(p.Field, from)
			}
		}
	}
	return err
}

// listProfiles lists the RuntimeProfiles Agents may select; with include_disabled=true
// an administrator sees every one, as the administration view does.
func (s *Server) listProfiles(c *gin.Context) {
	if err := knownQuery(c, "include_disabled"); err != nil {
		s.fail(c, err)
		return
	}
	all, err := queryBool(c, "include_disabled")
	if err != nil {
		s.fail(c, err)
		return
	}
	if all {
		if err := requireAdmin(c); err != nil {
			s.fail(c, err)
			return
		}
	}
	profiles, err := s.store.ListRuntimeProfiles(c.Request.Context(), !all)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := []profileView{}
	for _, p := range profiles {
		v := s.newProfileView(p)
		if all || v.Offered {
			out = append(out, v)
		}
	}
	writeOK(c, out)
}

func (s *Server) getProfile(c *gin.Context) {
	p, err := s.loadProfile(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, s.newProfileView(p))
}

func (s *Server) enableProfile(c *gin.Context)  { s.setProfileEnabled(c, true) }
func (s *Server) disableProfile(c *gin.Context) { s.setProfileEnabled(c, false) }

func (s *Server) setProfileEnabled(c *gin.Context, enabled bool) {
	if err := requireAdmin(c); err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.loadProfile(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.store.SetRuntimeProfileEnabled(c.Request.Context(), p.ID, enabled); err != nil {
		s.fail(c, err)
		return
	}
	p, err = s.store.GetRuntimeProfileByID(c.Request.Context(), p.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, s.newProfileView(p))
}

func (s *Server) loadProfile(c *gin.Context) (store.RuntimeProfile, error) {
	id := c.Param("profile_id")
	if !isUUID(id) {
		return store.RuntimeProfile{}, NotFound("runtime profile " + id)
	}
	p, err := s.store.GetRuntimeProfileByID(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.RuntimeProfile{}, NotFound("runtime profile " + id)
	}
	return p, err
}
