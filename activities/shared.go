package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// LoadSession reads what the workflow needs to start or continue: the Agent and
// engine, the stored lifecycle and placement, and the idle period.
func (a *Activities) LoadSession(ctx context.Context, ref SessionRef) (SessionFacts, error) {
	sess, err := a.deps.Store.GetSessionByID(ctx, ref.SessionID)
	if err != nil {
		return SessionFacts{}, sessionErr(err)
	}
	agent, err := a.deps.Store.GetAgentByID(ctx, sess.AgentID)
	if err != nil {
		return SessionFacts{}, sessionErr(err)
	}
	observed, err := a.deps.Store.GetSessionFactsByID(ctx, ref.SessionID)
	if err != nil {
		return SessionFacts{}, sessionErr(err)
	}
	facts := SessionFacts{
		AgentID:            sess.AgentID,
		AgentName:          agent.Name,
		Owner:              sess.UserID,
		Observed:           observationOf(observed),
		EngineKind:         agent.EngineKind,
		Lifecycle:          sess.Lifecycle,
		Archived:           sess.ArchivedAt != nil,
		RuntimeUnavailable: sess.RuntimeUnavailable,
		Placement:          Placement{RuntimeGeneration: sess.RuntimeGeneration},
	}
	if sess.SandboxID != nil {
		facts.Placement.SandboxID = *sess.SandboxID
	}
	if sess.HostTaskQueue != nil {
		facts.Placement.HostTaskQueue = *sess.HostTaskQueue
	}
	if a.set.IdleRelease > 0 {
		facts.IdleReleaseSeconds = int64(a.set.IdleRelease.Seconds())
	}
	return facts, nil
}

// PrepareRuntime gets a box for the Session. PrepareFresh resolves the current Agent
// and RuntimeProfile, claims a prewarmed box or creates one, and records the new
// placement (the next runtime generation); the conversation is restored when the
// Session already has one. PrepareReconnect checks that the current box lives. Either
// way the result names this worker's host task queue, where ActivateRuntime runs.
func (a *Activities) PrepareRuntime(ctx context.Context, req PrepareRequest) (PrepareResult, error) {
	defer a.keepAlive(ctx)()
	sess, agent, profile, adapter, err := a.resolve(ctx, req.SessionID)
	if err != nil {
		return PrepareResult{}, err
	}
	if sess.Lifecycle == store.LifecycleDeleted || sess.ArchivedAt != nil {
		return PrepareResult{}, temporal.NewNonRetryableApplicationError("session is archived or deleted", ErrTypeSessionGone, nil)
	}
	backend, err := a.backendFor(profile)
	if err != nil {
		return PrepareResult{}, err
	}
	if err := checkTenancy(engines.SandboxTenancy(profile.SandboxTenancy), profile.SandboxBackend, backend.Capabilities(), adapter.Capabilities()); err != nil {
		reason := fmt.Sprintf("the Agent program %s cannot start: %v", agent.EngineKind, err)
		if serr := a.deps.Store.SetSessionRuntimeError(ctx, sess.ID, reason); serr != nil {
			return PrepareResult{}, serr
		}
		return PrepareResult{}, temporal.NewNonRetryableApplicationError(reason, ErrTypeConfiguration, err)
	}
	res := PrepareResult{EngineKind: agent.EngineKind}
	owner, err := a.credentialOwner(ctx, agent, profile)
	if err != nil {
		return PrepareResult{}, err
	}
	if req.Mode == PrepareReconnect {
		if sess.SandboxID == nil {
			return PrepareResult{}, temporal.NewNonRetryableApplicationError("session has no box", ErrTypeRuntimeLost, nil)
		}
		if err := a.checkAlive(ctx, backend, *sess.SandboxID); err != nil {
			return PrepareResult{}, err
		}
		if err := a.replaceForNewOwner(ctx, backend, sess, owner); err != nil {
			return PrepareResult{}, err
		}
		res.Placement = Placement{SandboxID: *sess.SandboxID, HostTaskQueue: a.deps.HostTaskQueue, RuntimeGeneration: sess.RuntimeGeneration}
		if sess.EngineSessionKey != nil && *sess.EngineSessionKey != "" {
			res.AttachMode = string(engines.AttachReconnect)
		}
		// Without a conversation key the box was placed but never activated: the
		// program starts its conversation there as for a new Session.
		return res, nil
	}
	if !profile.Enabled {
		return PrepareResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("runtime profile %s is disabled", profile.ID), ErrTypeConfiguration, nil)
	}
	h, err := a.claimOrCreate(ctx, backend, sess.ID, profile, agent, adapter)
	if notReady := (*sandbox.NotReadyError)(nil); errors.As(err, &notReady) {
		// The image cannot serve: a new box would fail the same way, so the Session
		// says why instead of retrying.
		reason := fmt.Sprintf("the Agent program %s cannot start: its entry point (%s) %s", agent.EngineKind,
			strings.Join(adapter.SandboxRequest().EntryPoint, " "), notReady)
		if serr := a.deps.Store.SetSessionRuntimeError(ctx, sess.ID, reason); serr != nil {
			return PrepareResult{}, serr
		}
		return PrepareResult{}, temporal.NewNonRetryableApplicationError(reason, ErrTypeConfiguration, err)
	}
	if err != nil {
		return PrepareResult{}, err
	}
	defer h.Close()
	gen, err := a.deps.Store.PlaceRuntimeFor(ctx, sess.ID, h.ID(), owner)
	if err != nil {
		// The box is ours alone; do not leak it when the Session cannot take it.
		if derr := backend.Destroy(context.WithoutCancel(ctx), h.ID()); derr != nil {
			a.logger(ctx, sess.ID).Warn("destroy unplaced box", zap.Error(derr))
		}
		return PrepareResult{}, sessionErr(err)
	}
	res.Placement = Placement{SandboxID: h.ID(), HostTaskQueue: a.deps.HostTaskQueue, RuntimeGeneration: gen}
	if sess.EngineSessionKey != nil && *sess.EngineSessionKey != "" {
		res.AttachMode = string(engines.AttachRestore)
	}
	return res, nil
}

// SessionMetadata is the box metadata key naming the Session a box was made
// for (a remote backend's label, for operators); a claimed prewarmed box was
// made for none.
const SessionMetadata = "session_id"

func (a *Activities) claimOrCreate(ctx context.Context, backend sandbox.Backend, sessionID string, profile store.RuntimeProfile, agent store.Agent, adapter engines.EngineAdapter) (sandbox.Handle, error) {
	if profile.PrewarmSize > 0 {
		h, err := backend.Claim(ctx, profile.ID)
		if err == nil {
			return h, nil
		}
		if !errors.Is(err, sandbox.ErrNoWarmBox) && !errors.Is(err, sandbox.ErrNotSupported) {
			return nil, fmt.Errorf("claim prewarmed box: %w", err)
		}
		a.ensurePrewarm(ctx, backend, profile, adapter)
	}
	spec, err := a.deps.SpecFor(profile, agent, adapter)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("build box spec: %v", err), ErrTypeConfiguration, err)
	}
	if spec.Metadata == nil {
		spec.Metadata = map[string]string{}
	}
	spec.Metadata[SessionMetadata] = sessionID
	h, err := backend.Create(ctx, spec)
	if errors.Is(err, sandbox.ErrInvalidSpec) {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConfiguration, err)
	}
	if err != nil {
		return nil, fmt.Errorf("create box: %w", err)
	}
	return h, nil
}

// checkAlive tells a lost connection from a lost box: only a box the backend no
// longer has, or reports terminated, failed or dead, is lost.
func (a *Activities) checkAlive(ctx context.Context, backend sandbox.Backend, id string) error {
	h, err := backend.Get(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrBoxLost) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("box %s is gone", id), ErrTypeRuntimeLost, err)
	}
	if err != nil {
		return fmt.Errorf("get box %s: %w", id, err)
	}
	defer h.Close()
	info, err := h.Info(ctx)
	if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrBoxLost) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("box %s is gone", id), ErrTypeRuntimeLost, err)
	}
	if err != nil {
		return fmt.Errorf("read box %s: %w", id, err)
	}
	if info.Death != nil || info.State == sandbox.StateTerminated || info.State == sandbox.StateFailed {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("box %s is lost (%s)", id, info.State), ErrTypeRuntimeLost, nil)
	}
	return nil
}

// CheckIdle reports whether nothing runs or waits in the Session: the runtime is idle
// and no response, interaction or held input is open.
func (a *Activities) CheckIdle(ctx context.Context, ref SessionRef) (IdleResult, error) {
	facts, err := a.deps.Store.GetSessionFactsByID(ctx, ref.SessionID)
	if err != nil {
		return IdleResult{}, sessionErr(err)
	}
	return IdleResult{Idle: facts.State() == store.StateReady}, nil
}

// Release frees the Session's box and records the runtime unavailable; the
// conversation stays, and the next input starts a new box that resumes it.
func (a *Activities) Release(ctx context.Context, req ReleaseRequest) (ReleaseResult, error) {
	_, _, profile, _, err := a.resolve(ctx, req.SessionID)
	if err != nil {
		return ReleaseResult{}, err
	}
	if req.SandboxID != "" {
		backend, err := a.backendFor(profile)
		if err != nil {
			return ReleaseResult{}, err
		}
		if err := backend.Release(ctx, req.SandboxID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			return ReleaseResult{}, fmt.Errorf("release box %s: %w", req.SandboxID, err)
		}
	}
	held, err := a.deps.Store.ReleaseSessionRuntime(ctx, req.SessionID)
	return ReleaseResult{HeldOnNotice: held}, err
}

// EndConversation fails the Session's held inputs with CONVERSATION_ENDED and, for a
// delete, moves it to deleted.
func (a *Activities) EndConversation(ctx context.Context, req EndRequest) (EndResult, error) {
	ids, err := a.deps.Store.FailHeldInputs(ctx, req.SessionID, store.InputFailureConversationEnded, "the conversation was archived or deleted before the Agent program took this message")
	if err != nil {
		return EndResult{}, err
	}
	if req.Delete {
		// The API deletes first (refusing a working Session); this makes it so for a
		// delete that reached the workflow another way.
		if _, err := a.deps.Store.DeleteSession(ctx, req.SessionID); err != nil && !errors.Is(err, store.ErrSessionBusy) {
			return EndResult{}, err
		}
	}
	return EndResult{FailedInputs: ids}, nil
}

// RefuseHeldInputs fails every held input with RUNTIME_PREPARATION_REFUSED and the
// reason, and reports each on the stream as a data-input-failed part: the
// deployment's preparation refused to start the Agent program, so these messages will
// not run, and a client following the stream learns why.
func (a *Activities) RefuseHeldInputs(ctx context.Context, req RefuseRequest) ([]string, error) {
	return a.deps.Store.FailHeldInputsReported(ctx, req.SessionID, store.InputFailurePreparationRefused, req.Reason)
}

// MarkTerminated takes the Session's runtime offline until recovered. A TERMINATED
// Session has no runtime, so nothing of one may stay open: its box is released (which
// confirms the runtime lost), then the records are settled as for a lost runtime (the
// open response ends failed with runtime_lost, open interactions expire, delivered
// but unadmitted inputs return to custody, runtime_status is cleared), and only then
// is the lifecycle recorded. Without that a stale "working" report kept archive and
// delete answering SESSION_BUSY for ever.
func (a *Activities) MarkTerminated(ctx context.Context, ref SessionRef) error {
	if err := a.releaseForTermination(ctx, ref.SessionID); err != nil {
		return err
	}
	if _, err := a.ReconcileLostRuntime(ctx, ReconcileRequest{SessionID: ref.SessionID}); err != nil {
		return fmt.Errorf("settle the terminated runtime: %w", err)
	}
	_, err := a.deps.Store.SetSessionLifecycle(ctx, ref.SessionID, store.LifecycleTerminated)
	return err
}

// releaseForTermination frees the Session's box, if it has one. An Agent program that
// is not installed (a usual cause of a termination) does not stop the release: resolve
// has read the profile by then. A backend this worker does not run made no box this
// worker could free.
func (a *Activities) releaseForTermination(ctx context.Context, sessionID string) error {
	sess, _, profile, _, err := a.resolve(ctx, sessionID)
	var app *temporal.ApplicationError
	if err != nil && !(errors.As(err, &app) && app.Type() == ErrTypeConfiguration) {
		return err
	}
	if sess.SandboxID == nil {
		return nil
	}
	backend, err := a.backendFor(profile)
	if err != nil {
		a.log.Warn("terminate: the box's backend does not run on this worker", zap.String("session_id", sessionID), zap.Error(err))
		return nil
	}
	if err := backend.Release(ctx, *sess.SandboxID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("release box %s of a terminated runtime: %w", *sess.SandboxID, err)
	}
	return nil
}

// observationOf is the observation of a Session's facts.
func observationOf(f store.SessionFacts) SessionObservation {
	o := SessionObservation{State: string(f.State()), OpenResponses: f.OpenResponses,
		OpenInteractions: f.OpenInteractions, HeldInputs: f.HeldInputs}
	if f.Title != nil {
		o.Title = *f.Title
	}
	return o
}

// Placement is where a Session's runtime is.
type Placement struct {
	SandboxID         string `json:"sandbox_id,omitempty"`
	HostTaskQueue     string `json:"host_task_queue,omitempty"`
	RuntimeGeneration int64  `json:"runtime_generation"`
}

// PrepareMode says what PrepareRuntime should do.
type PrepareMode string

// The prepare modes.
const (
	// PrepareFresh claims or creates a new box (a new Session, or a replacement after
	// loss or release; the conversation is resumed when the Session has one).
	PrepareFresh PrepareMode = "fresh"
	// PrepareReconnect checks that the Session's current box is alive, for a new
	// connection to it; it fails with ErrTypeRuntimeLost when the box is gone.
	PrepareReconnect PrepareMode = "reconnect"
)

// PrepareRequest asks PrepareRuntime for a box.
type PrepareRequest struct {
	SessionID string      `json:"session_id"`
	Mode      PrepareMode `json:"mode"`
}

// PrepareResult is the prepared box and the host task queue of the worker whose
// process will hold the runtime connection.
type PrepareResult struct {
	Placement Placement `json:"placement"`
	// AttachMode is empty for a new conversation, reconnect for the same box, restore
	// for a replacement box resuming the Session's conversation.
	AttachMode string `json:"attach_mode,omitempty"`
	EngineKind string `json:"engine_kind"`
}

// ActivateRequest asks ActivateRuntime to connect the runtime in a prepared box.
type ActivateRequest struct {
	SessionID         string `json:"session_id"`
	SandboxID         string `json:"sandbox_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	AttachMode        string `json:"attach_mode,omitempty"`
}

// ActivateResult is the live runtime's placement.
type ActivateResult struct {
	HostTaskQueue string `json:"host_task_queue"`
	// RuntimeSummary is the runtime-info snapshot in one line (program version,
	// runner and adapter builds), for the workflow's memo.
	RuntimeSummary string `json:"runtime_summary,omitempty"`
}

// RuntimeRef names a Session's runtime generation, for host activities.
type RuntimeRef struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
}

// RelayRequest starts a Session's Relay on the host holding its runtime.
type RelayRequest struct {
	RuntimeRef
	// RelayID names this Relay among the Session's, for StopRelay: the workflow's run
	// and its count of the Relays it started. Empty from a workflow that stops its
	// Relays through Temporal's cancellation alone.
	RelayID string `json:"relay_id,omitempty"`
}

// StopRelayRequest names the Relay StopRelay ends.
type StopRelayRequest struct {
	RuntimeRef
	RelayID string `json:"relay_id"`
}

// RelayEnd says why a Relay ended without an error.
type RelayEnd string

// The relay ends.
const (
	// RelayConnectionLost: the connection dropped; the box may live (reconnect).
	RelayConnectionLost RelayEnd = "connection_lost"
	// RelayStopped: StopRelay ended it, as its workflow asked.
	RelayStopped RelayEnd = "stopped"
)

// RelayResult is how a Relay ended.
type RelayResult struct {
	End RelayEnd `json:"end"`
	// ThroughSeq is the last output seq the Relay committed.
	ThroughSeq int64 `json:"through_seq"`
}

// RelayProgress is a Relay's heartbeat detail.
type RelayProgress struct {
	LeaseGeneration int64 `json:"lease_generation"`
	ThroughSeq      int64 `json:"through_seq"`
}

// DeliverResult lists the inputs handed to the runtime and the ones it refused.
type DeliverResult struct {
	Delivered []string `json:"delivered"`
	Refused   []string `json:"refused"`
}

// AnswerRequest passes a saved answer to the runtime.
type AnswerRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	InteractionID     string `json:"interaction_id"`
}

// InterruptRequest stops the response in progress.
type InterruptRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	CancelQueued      bool   `json:"cancel_queued"`
}

// PermissionModeRequest names a permission mode for a Session: to apply to its live
// runtime generation (ApplyPermissionMode), or to store (StorePermissionMode, which
// ignores the generation).
type PermissionModeRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation,omitempty"`
	PermissionMode    string `json:"permission_mode"`
}

// StopChildRunRequest asks the runtime to stop one child run; the control reference is
// read from PostgreSQL by the activity, never carried in the history.
type StopChildRunRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	ChildRunID        string `json:"child_run_id"`
}

// ReconcileRequest settles the records of a runtime confirmed lost.
type ReconcileRequest struct {
	SessionID string `json:"session_id"`
}

// RefuseRequest fails the Session's held inputs with the preparation's refusal.
type RefuseRequest struct {
	SessionID string `json:"session_id"`
	// Reason is the refusal as the preparation said it.
	Reason string `json:"reason"`
}

// ReleaseRequest frees a Session's box.
type ReleaseRequest struct {
	SessionID string `json:"session_id"`
	SandboxID string `json:"sandbox_id"`
}

// ReleaseResult is what a release leaves for the workflow to do.
type ReleaseResult struct {
	// HeldOnNotice counts the held inputs accepted while a Relay handed inputs over
	// on notice: the workflow was not signalled for them, and brings a runtime up
	// for them as for a signalled input.
	HeldOnNotice int `json:"held_on_notice,omitempty"`
}

// ReconcileResult is what settling a lost runtime leaves for the workflow to do.
type ReconcileResult struct {
	// HeldOnNotice counts, as ReleaseResult's does, the held inputs accepted while a
	// Relay handed inputs over on notice, when no release had counted them before.
	HeldOnNotice int `json:"held_on_notice,omitempty"`
}

// IdleResult says whether a Session is idle enough to release its box.
type IdleResult struct {
	Idle bool `json:"idle"`
}

// EndRequest ends a conversation: held inputs fail with CONVERSATION_ENDED, and a
// delete moves the Session to deleted.
type EndRequest struct {
	SessionID string `json:"session_id"`
	Delete    bool   `json:"delete"`
}

// EndResult lists the inputs that failed.
type EndResult struct {
	FailedInputs []string `json:"failed_inputs"`
}

// ensurePrewarm starts the prewarm pool of a profile that asks for one and found no
// ready box, when the backend can add pools while it runs: a profile saved after the
// worker started is prewarmed from its first Session on, without a restart. The pool's
// boxes are made for the profile alone, as the worker's start-up pools are.
func (a *Activities) ensurePrewarm(ctx context.Context, backend sandbox.Backend, profile store.RuntimeProfile, adapter engines.EngineAdapter) {
	p, ok := backend.(sandbox.Prewarmer)
	if !ok {
		return
	}
	spec, err := a.deps.SpecFor(profile, store.Agent{EngineKind: profile.EngineKind}, adapter)
	if err == nil {
		var added bool
		added, err = p.EnsurePrewarm(profile.ID, spec, profile.PrewarmSize)
		if added {
			a.log.Info("prewarm pool started", zap.String("runtime_profile", profile.ID), zap.Int("size", profile.PrewarmSize))
		}
	}
	if err != nil {
		a.log.Warn("not prewarming", zap.String("runtime_profile", profile.ID), zap.Error(err))
	}
}

// credentialOwner is the model credential delivery owner the deployment declares for
// the conversation's current configuration, "" when none.
func (a *Activities) credentialOwner(ctx context.Context, agent store.Agent, profile store.RuntimeProfile) (string, error) {
	if a.deps.CredentialOwner == nil {
		return "", nil
	}
	owner, err := a.deps.CredentialOwner(ctx, agent, profile)
	if err != nil {
		return "", fmt.Errorf("declare the model credential delivery owner: %w", err)
	}
	return owner, nil
}

// replaceForNewOwner refuses to reattach to a runtime placed with another model
// credential delivery owner than the one declared now: a running runtime cannot take
// a different owner. The box is released and the reconnect answered RuntimeLost, so
// the workflow settles the old runtime's records and places a replacement, which
// restores the conversation and records the new owner.
func (a *Activities) replaceForNewOwner(ctx context.Context, backend sandbox.Backend, sess store.Session, owner string) error {
	if owner == "" || (sess.ModelCredentialOwner != nil && *sess.ModelCredentialOwner == owner) {
		return nil
	}
	a.logger(ctx, sess.ID).Info("model credential delivery owner changed: replacing the runtime", zap.String("sandbox_id", *sess.SandboxID))
	a.live.removeSession(sess.ID)
	if err := backend.Release(ctx, *sess.SandboxID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("release box %s for a new credential owner: %w", *sess.SandboxID, err)
	}
	return temporal.NewNonRetryableApplicationError("the model credential delivery owner changed; the runtime is replaced", ErrTypeRuntimeLost, nil)
}
