// Package config owns AstraBox's configuration: defaults, an optional YAML file,
// ASTRABOX_* environment variables and command-line flags, read through one viper
// instance into one typed Config that is validated before anything starts.
package config

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Config is the whole validated configuration of one AstraBox process.
type Config struct {
	Log      Log      `mapstructure:"log"`
	HTTP     HTTP     `mapstructure:"http"`
	Database Database `mapstructure:"database"`
	Temporal Temporal `mapstructure:"temporal"`
	Sandbox  Sandbox  `mapstructure:"sandbox"`
	Models   Models   `mapstructure:"models"`
	Titles   Titles   `mapstructure:"titles"`
	Engines  Engines  `mapstructure:"engines"`
	Dev      Dev      `mapstructure:"dev"`
	Startup  Startup  `mapstructure:"startup"`
	Secrets  Secrets  `mapstructure:"secrets"`
	Metrics  Metrics  `mapstructure:"metrics"`
	Tracing  Tracing  `mapstructure:"tracing"`
	Debug    Debug    `mapstructure:"debug"`
}

// Debug configures what operators use to look inside a running process. Everything
// here is off by default.
type Debug struct {
	// PprofAddr is a host:port on which serve, worker and dev serve Go's profiles
	// (/debug/pprof/) and runtime figures (/debug/vars), with no authentication:
	// bind it to a loopback or otherwise private address. Empty serves nothing.
	PprofAddr string `mapstructure:"pprof_addr"`
}

// Metrics configures the Prometheus metrics. The API serves them at /metrics on
// http.addr; a worker process serves them on its own listener.
type Metrics struct {
	// Listen is the worker's metrics listener (host:port, or :port for every
	// interface); empty serves no worker metrics. `astrabox dev` serves the one
	// process's metrics on the API's /metrics only.
	Listen string `mapstructure:"listen"`
}

// Tracing configures OpenTelemetry traces: API requests, the Temporal calls they
// make, workflows and activities, exported by OTLP.
type Tracing struct {
	// OTLPEndpoint is the OTLP/gRPC collector (host:port); empty exports no traces.
	OTLPEndpoint string `mapstructure:"otlp_endpoint"`
	// OTLPInsecure sends spans without TLS (a collector beside the process).
	OTLPInsecure bool `mapstructure:"otlp_insecure"`
	// ServiceName is the service.name resource attribute of every span.
	ServiceName string `mapstructure:"service_name"`
	// SampleRatio is the share of new traces recorded (0..1); a request that
	// arrives with a sampled parent is always recorded.
	SampleRatio float64 `mapstructure:"sample_ratio"`
}

// Secrets configures how the platform keeps the secret values users store (an Agent's
// MCP server env values and headers).
type Secrets struct {
	// Key is the AES-256-GCM key sealing stored secret values: 32 random bytes in
	// standard base64 (openssl rand -base64 32). Empty refuses to store secret values;
	// `astrabox dev` generates one under its data folder.
	Key Secret `mapstructure:"key"`
	// Platform holds the named platform secrets an Agent program's adapter may ask for
	// in its StartupMaterialRequest (secrets.platform.<name>; names are lower case). They
	// are resolved into the program's startup context at activation and never logged.
	Platform map[string]Secret `mapstructure:"platform"`
}

// SecretsKeyLen is the length in bytes of secrets.key once decoded.
const SecretsKeyLen = 32

// KeyBytes returns the decoded secrets.key, or nil when none is set. Validate has
// checked its form.
func (s Secrets) KeyBytes() []byte {
	if !s.Key.IsSet() {
		return nil
	}
	key, err := base64.StdEncoding.DecodeString(s.Key.Reveal())
	if err != nil {
		return nil
	}
	return key
}

// Log selects the log level and format.
type Log struct {
	// Level is one of debug, info, warn, error.
	Level string `mapstructure:"level"`
	// Format is console (human-readable, the dev default) or json (the default otherwise).
	// Empty means: console for `astrabox dev`, json for every other command.
	Format string `mapstructure:"format"`
}

// HTTP configures the API server.
type HTTP struct {
	// Addr is the host:port the API listens on.
	Addr string `mapstructure:"addr"`
	// PublicURL is the URL clients use to reach the API; empty derives it from Addr.
	PublicURL string `mapstructure:"public_url"`
	// ShutdownTimeout bounds how long in-flight requests may finish on shutdown.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// MaxInputBytes limits the size of one message's content.
	MaxInputBytes int `mapstructure:"max_input_bytes"`
	// MaxBodyBytes caps a request body other than a message (whose cap follows
	// MaxInputBytes) and a history import; a larger one is refused with 413.
	MaxBodyBytes int `mapstructure:"max_body_bytes"`
	// MaxUploadBytes caps one upload to a Session's workspace (413 beyond; the
	// upload then writes nothing).
	MaxUploadBytes int64 `mapstructure:"max_upload_bytes"`
	// ReadTimeout bounds reading one whole request, body included; a client trickling
	// its body is cut at it. Streams are not affected: they read no body.
	ReadTimeout time.Duration `mapstructure:"read_timeout"`
	// IdleTimeout closes a kept-alive connection that sends no next request.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// MaxStreamsPerToken caps the output streams one API token may hold open at once on
	// one API replica; one more is refused with 429 TOO_MANY_STREAMS.
	MaxStreamsPerToken int `mapstructure:"max_streams_per_token"`
	// TokenRecheckInterval is how often an open stream re-checks its token, ending the
	// stream once the token is revoked or expired.
	TokenRecheckInterval time.Duration `mapstructure:"token_recheck_interval"`
	// TokenCacheTTL is how long an API replica keeps an authenticated token and its
	// user without reading them again; a revoked token or a disabled user is dropped
	// from every replica's cache when the change's announcement arrives. Zero reads
	// them at every request.
	TokenCacheTTL time.Duration `mapstructure:"token_cache_ttl"`
	// MaxHeldInputs caps the accepted messages a Session may hold before the Agent
	// program takes them; one more is refused with 429 ADMISSION_DENIED. Zero admits all.
	MaxHeldInputs int `mapstructure:"max_held_inputs"`
}

// Database locates PostgreSQL.
type Database struct {
	Host     string `mapstructure:"host"`
	Port     int    `mapstructure:"port"`
	User     string `mapstructure:"user"`
	Password Secret `mapstructure:"password"`
	Name     string `mapstructure:"name"`
	// SSLMode is a libpq sslmode: disable, allow, prefer, require, verify-ca, verify-full.
	SSLMode string `mapstructure:"sslmode"`
	// MaxOpenConns bounds the pool of the GORM handle.
	MaxOpenConns int `mapstructure:"max_open_conns"`
}

// Temporal locates the Temporal frontend.
type Temporal struct {
	// Address is the frontend's host:port.
	Address string `mapstructure:"address"`
	// Namespace holds the Session workflows.
	Namespace string `mapstructure:"namespace"`
	// TaskQueue is the shared task queue; host-specific queues derive from it.
	TaskQueue string `mapstructure:"task_queue"`
	// ResignalInterval is how often each worker looks for inputs still pending after
	// ResignalGrace and signals their Sessions' workflows again: the API's own signal
	// may have failed while Temporal was unreachable.
	ResignalInterval time.Duration `mapstructure:"resignal_interval"`
	// ResignalGrace is how long an input may stay pending before it is signalled again.
	ResignalGrace time.Duration `mapstructure:"resignal_grace"`
	// WorkflowCacheSize bounds the Session workflows a worker process keeps in memory
	// between their tasks (least recently used evicted, then replayed from history when
	// next needed); 0 keeps the Temporal SDK's default (10,000).
	WorkflowCacheSize int `mapstructure:"workflow_cache_size"`
	// UIURL is where operators open the Temporal Web UI, printed for convenience.
	UIURL string `mapstructure:"ui_url"`
	TLS   TLS    `mapstructure:"tls"`
	// APIKey authenticates to a hosted Temporal; empty for none.
	APIKey Secret `mapstructure:"api_key"`
	// Versioning opts the workers into Worker Deployment Versioning.
	Versioning Versioning `mapstructure:"versioning"`
}

// Versioning names this binary's Worker Deployment Version, so that during a rolling
// upgrade each Session workflow keeps running on the build it started on (pinned)
// until operators make a new version current (docs/deploy.md).
type Versioning struct {
	// Enabled makes every worker poll as DeploymentName.BuildID.
	Enabled bool `mapstructure:"enabled"`
	// DeploymentName groups the versions of one deployment (default astrabox).
	DeploymentName string `mapstructure:"deployment_name"`
	// BuildID names this build; empty uses the binary's build (`astrabox version`).
	BuildID string `mapstructure:"build_id"`
	// Behavior is what a running Session workflow does when a newer version becomes
	// current: VersioningAutoUpgrade (default) or VersioningPinned.
	Behavior string `mapstructure:"behavior"`
}

// Versioning behaviors (temporal.versioning.behavior).
const (
	// VersioningAutoUpgrade moves running workflows to the current version at their
	// next workflow task; the new build must replay their histories (the workflow
	// package's replay tests guard this).
	VersioningAutoUpgrade = "auto_upgrade"
	// VersioningPinned keeps each workflow on the version it started on until it
	// ends, so the old build's workers must run until its Sessions end.
	VersioningPinned = "pinned"
)

// TLS configures mutual TLS to Temporal.
type TLS struct {
	Enabled    bool   `mapstructure:"enabled"`
	CertFile   string `mapstructure:"cert_file"`
	KeyFile    string `mapstructure:"key_file"`
	CAFile     string `mapstructure:"ca_file"`
	ServerName string `mapstructure:"server_name"`
}

// Sandbox selects and configures the sandbox backend.
type Sandbox struct {
	// Backend names the sandbox backend the worker runs: local (bubblewrap) is
	// the embedded default; kubernetes runs boxes as agent-sandbox Sandboxes in
	// a cluster. RuntimeProfiles name the backend their boxes need
	// (sandbox_backend).
	Backend    string     `mapstructure:"backend"`
	Local      Local      `mapstructure:"local"`
	Kubernetes Kubernetes `mapstructure:"kubernetes"`
	// OpenSandbox, when its URL is set, offers the opensandbox backend to
	// RuntimeProfiles beside the worker's own backend.
	OpenSandbox OpenSandbox `mapstructure:"opensandbox"`
	// Limits bound every box where its RuntimeProfile's resources say nothing.
	Limits Limits `mapstructure:"limits"`
	// MaxLiveBoxesPerUser caps the Sessions with a live box one user may hold;
	// creating one more is refused with 429 ADMISSION_DENIED. 0: no cap.
	MaxLiveBoxesPerUser int `mapstructure:"max_live_boxes_per_user"`
	// IdleRelease is how long a Session may stay idle (no reply in progress, no
	// input held, no question open) before its box is released; its next message
	// resumes the program's conversation in a new box. 0 keeps boxes until the
	// Session is archived or deleted.
	IdleRelease time.Duration `mapstructure:"idle_release"`
}

// Limits are default box resources in the RuntimeProfile's notation (see
// sandbox.ParseResources); an empty or zero value leaves that resource
// unbounded. A backend refuses a box whose limits this machine cannot enforce.
type Limits struct {
	// CPU is in cores ("1", "1.5") or millicores ("500m").
	CPU string `mapstructure:"cpu"`
	// Memory is a byte quantity ("2Gi"); /tmp is charged to it too.
	Memory string `mapstructure:"memory"`
	// Pids caps processes and threads.
	Pids int `mapstructure:"pids"`
	// Tmp sizes each box's private /tmp ("512Mi").
	Tmp string `mapstructure:"tmp"`
}

// Sandbox returns the limits as the sandbox layer takes them.
func (l Limits) Sandbox() (sandbox.Limits, error) {
	raw, err := json.Marshal(map[string]any{sandbox.ResourceCPU: l.CPU, sandbox.ResourceMemory: l.Memory,
		sandbox.ResourcePids: l.Pids, sandbox.ResourceTmp: l.Tmp})
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("encode limits: %w", err)
	}
	out, err := sandbox.ParseResources(raw)
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("sandbox.limits: %w", err)
	}
	return out, nil
}

// Local configures the local bubblewrap backend.
type Local struct {
	// StateDir keeps box state, workspaces and runner journals.
	StateDir string `mapstructure:"state_dir"`
	// UIDBase and UIDCount give the range of host uids (and gids) handed to boxes.
	UIDBase  int `mapstructure:"uid_base"`
	UIDCount int `mapstructure:"uid_count"`
	// RunnerPath is the astrabox-runner binary bound into every box; empty finds it
	// next to the astrabox binary.
	RunnerPath string `mapstructure:"runner_path"`
}

// OpenSandbox configures the backend on an OpenSandbox deployment's lifecycle
// API (docs/sandboxes.md). Its boxes run images whose entry point is the
// AstraBox runner.
type OpenSandbox struct {
	// URL is the lifecycle API's base URL with its /v1; empty: not offered.
	URL string `mapstructure:"url"`
	// APIKey is sent as OPEN-SANDBOX-API-KEY.
	APIKey Secret `mapstructure:"api_key"`
	// RunnerKey derives each box's runner token; at least 16 characters, kept
	// the same across restarts so workers reach the boxes they find.
	RunnerKey Secret `mapstructure:"runner_key"`
	// Deployment labels this deployment's boxes: List and Reap see only them.
	Deployment string `mapstructure:"deployment"`
	// CAFile, when set, is the PEM bundle that verifies the server's and the
	// runners' TLS certificates instead of the system's.
	CAFile string `mapstructure:"ca_file"`
	// Entrypoint is the images' runner command; empty: astrabox-runner serve
	// -listen on RunnerPort from /usr/local/bin.
	Entrypoint []string `mapstructure:"entrypoint"`
	// RunnerPort is the runner's port in the box, whose endpoint is asked for.
	RunnerPort int `mapstructure:"runner_port"`
	// RunnerScheme is how runners' endpoints are reached: http or https.
	RunnerScheme string `mapstructure:"runner_scheme"`
	// UseServerProxy reaches runners through the server's own proxy.
	UseServerProxy bool `mapstructure:"use_server_proxy"`
	// ProgramUID and ProgramGID are the images' program account.
	ProgramUID int `mapstructure:"program_uid"`
	ProgramGID int `mapstructure:"program_gid"`
	// ReadyTimeout bounds a box's creation until it serves.
	ReadyTimeout time.Duration `mapstructure:"ready_timeout"`
	// RequestTimeout bounds one lifecycle request; Attempts is how often one
	// answered 429 or 5xx is tried in all.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
	Attempts       int           `mapstructure:"attempts"`
}

// Kubernetes configures the kubernetes sandbox backend (package
// sandbox/kubernetes, docs/deploy.md).
type Kubernetes struct {
	// Namespace holds the boxes; empty means the namespace the process runs in.
	Namespace string `mapstructure:"namespace"`
	// Kubeconfig is a kubeconfig file for a process outside the cluster; empty
	// uses the pod's service account.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// Instance labels this deployment's boxes, so that two deployments in one
	// namespace never list or reap each other's.
	Instance string `mapstructure:"instance"`
	// DefaultTemplate is the SandboxTemplate boxes are made from; Templates maps
	// a RuntimeProfile id to another one.
	DefaultTemplate string            `mapstructure:"default_template"`
	Templates       map[string]string `mapstructure:"templates"`
	// BoxContainer names the template's container that runs the runner (empty:
	// the first).
	BoxContainer string `mapstructure:"box_container"`
	// RunnerCommand is the runner's path in the box image.
	RunnerCommand []string `mapstructure:"runner_command"`
	// RunnerPort is the TCP port the runner serves on in the box's pod.
	RunnerPort int `mapstructure:"runner_port"`
	// RunAsUser is the account of the box's containers.
	RunAsUser int64 `mapstructure:"run_as_user"`
	// StorageClass and WorkspaceSize shape persistent workspaces' volumes.
	StorageClass  string `mapstructure:"storage_class"`
	WorkspaceSize string `mapstructure:"workspace_size"`
	// ReadyTimeout bounds the wait for a new box (image pull included).
	ReadyTimeout time.Duration `mapstructure:"ready_timeout"`
}

// Models holds model-service credentials. The platform adds them on the host side
// of a box's egress; the Agent program only ever holds a placeholder.
type Models struct {
	AnthropicAPIKey  Secret `mapstructure:"anthropic_api_key"`
	AnthropicBaseURL string `mapstructure:"anthropic_base_url"`
	OpenAIAPIKey     Secret `mapstructure:"openai_api_key"`
	OpenAIBaseURL    string `mapstructure:"openai_base_url"`
	// GeminiAPIKey and GeminiBaseURL are the Gemini API's (Gemini CLI); the forward
	// sends the key as x-goog-api-key.
	GeminiAPIKey  Secret `mapstructure:"gemini_api_key"`
	GeminiBaseURL string `mapstructure:"gemini_base_url"`
}

// Titles configures automatic Session titles, written through the model service of
// models.anthropic_base_url (the Anthropic Messages API) with its credential.
type Titles struct {
	// Enabled turns automatic titles on: an untitled Session is titled from one of
	// its first responses; a title its owner set is never replaced.
	Enabled bool `mapstructure:"enabled"`
	// Model is the model asked for titles.
	Model string `mapstructure:"model"`
}

// Engines configures the installed Agent program adapters.
type Engines struct {
	Claude Claude `mapstructure:"claude"`
	// Scripted registers the scripted test program (engine kind "scripted") when its
	// binary is set: the load generator runs it in real boxes. Off by default.
	Scripted Scripted `mapstructure:"scripted"`
	Codex    Codex    `mapstructure:"codex"`
	Pi       Pi       `mapstructure:"pi"`
	// ACPPrograms are further Agent Client Protocol programs, each registered under
	// its own engine_kind through the generic ACP adapter: adding one is configuration.
	ACPPrograms []ACPProgram `mapstructure:"acp_programs"`
}

// Scripted configures the scripted test program, internal/scriptengine's scriptagent.
type Scripted struct {
	// Binary is the scriptagent executable on the host, bound read-only into local
	// boxes; empty leaves the engine kind unregistered.
	Binary string `mapstructure:"binary"`
}

// Pi configures the Pi adapter.
type Pi struct {
	// Command is Pi's argv inside the box (node and Pi's cli.js), for images that
	// install it. Empty uses the pinned release installed in tools/agents (make
	// deps-agents), bound read-only into local boxes and run on the system's Node.
	Command []string `mapstructure:"command"`
	// Model is the model id Pi asks the Anthropic Messages forward for; empty uses
	// the adapter's default.
	Model string `mapstructure:"model"`
}

// ACPProgram is an Agent Client Protocol program's profile (engines/acp.Profile;
// docs/engines/acp.md). The registry validates it at start.
type ACPProgram struct {
	Kind        string            `mapstructure:"kind"`
	Title       string            `mapstructure:"title"`
	Command     []string          `mapstructure:"command"`
	Env         map[string]string `mapstructure:"env"`
	Files       map[string]string `mapstructure:"files"`
	ModelKeyEnv string            `mapstructure:"model_key_env"`
	// ModelAPI is the model API the program speaks: anthropic (the default forward),
	// openai (the OpenAI forward, base URL ending in /v1) or gemini (the Gemini API
	// forward, base URL without a version: the program adds /v1beta).
	ModelAPI    string   `mapstructure:"model_api"`
	StateDir    string   `mapstructure:"state_dir"`
	StateDirEnv string   `mapstructure:"state_dir_env"`
	SessionLog  string   `mapstructure:"session_log"`
	StateFiles  []string `mapstructure:"state_files"`
	Modes       []string `mapstructure:"modes"`
	DefaultMode string   `mapstructure:"default_mode"`
	Busy        string   `mapstructure:"busy"`
	Admission   string   `mapstructure:"admission"`
	Resume      string   `mapstructure:"resume"`
	// MCPTransports are the MCP transports the program takes through ACP's mcpServers
	// (stdio, http, sse); InstructionsFile is where, under StateDir, it reads standing
	// instructions. Either left empty refuses that part of an Agent's configuration.
	MCPTransports    []string `mapstructure:"mcp_transports"`
	InstructionsFile string   `mapstructure:"instructions_file"`
	// ModeUpdateText starts the agent text the program sends as its mode notification
	// (kept out of the stream); LoadAfterStartMinute holds session/load back until a
	// later wall-clock minute than the session's start (engines/acp.Profile).
	ModeUpdateText       string `mapstructure:"mode_update_text"`
	LoadAfterStartMinute bool   `mapstructure:"load_after_start_minute"`
	// NewSessionMeta is sent as _meta of session/new (program options).
	NewSessionMeta map[string]any `mapstructure:"new_session_meta"`
	// Mounts bind host folders (the program's install) read-only into local boxes.
	Mounts []ACPMount `mapstructure:"mounts"`
}

// ACPMount binds a host folder into boxes at Target.
type ACPMount struct {
	Source string `mapstructure:"source"`
	Target string `mapstructure:"target"`
}

// Codex configures the Codex CLI adapter.
type Codex struct {
	// Command is the codex binary's argv inside the box, for images that install it.
	// Empty uses the pinned release installed in tools/agents (make deps-agents),
	// bound read-only into local boxes.
	Command []string `mapstructure:"command"`
	// Model is the model slug Codex asks for; empty leaves Codex's own default.
	Model string `mapstructure:"model"`
	// Features are Codex features turned on in every box ([features] in config.toml),
	// e.g. default_mode_request_user_input (the model may ask the person questions).
	Features []string `mapstructure:"features"`
}

// Claude configures the Claude Code adapter.
type Claude struct {
	// Command is Claude Code's argv inside the box, for images that install it.
	// Empty uses the pinned release installed in tools/agents (make deps-agents),
	// bound read-only into local boxes.
	Command []string `mapstructure:"command"`
}

// Dev configures `astrabox dev`, the all-in-one local stack.
type Dev struct {
	// DataDir keeps the managed PostgreSQL cluster, Temporal's database and dev.env.
	DataDir string `mapstructure:"data_dir"`
	// PostgresPort is the managed cluster's port on 127.0.0.1.
	PostgresPort int `mapstructure:"postgres_port"`
	// TemporalPort and TemporalUIPort are the dev server's frontend and Web UI ports.
	TemporalPort   int `mapstructure:"temporal_port"`
	TemporalUIPort int `mapstructure:"temporal_ui_port"`
	// TemporalBin is the Temporal CLI; empty looks in ./bin then on PATH.
	TemporalBin string `mapstructure:"temporal_bin"`
	// ModelPort is the scripted model server's port, used when no model
	// credentials are configured.
	ModelPort int `mapstructure:"model_port"`
	// Titles turns automatic titles on while the scripted model server stands in for
	// the model service (no Anthropic credential configured), so a local platform
	// shows them; titles.enabled decides everywhere else.
	Titles bool `mapstructure:"titles"`
}

// Startup bounds how long a process waits for its dependencies.
type Startup struct {
	// Timeout is how long to keep retrying PostgreSQL and Temporal at start.
	Timeout time.Duration `mapstructure:"timeout"`
}

// DSN returns the libpq connection string. It carries the password, so it must
// never be logged; RedactedDSN is the printable form.
func (d Database) DSN() string { return d.dsn(d.Password.Reveal()) }

// RedactedDSN returns the connection string with the password replaced.
func (d Database) RedactedDSN() string { return d.dsn(d.Password.String()) }

func (d Database) dsn(password string) string {
	u := url.URL{
		Scheme: "postgres",
		Host:   d.Host + ":" + strconv.Itoa(d.Port),
		Path:   "/" + d.Name,
	}
	if password != "" {
		u.User = url.UserPassword(d.User, password)
	} else {
		u.User = url.User(d.User)
	}
	q := url.Values{}
	q.Set("sslmode", d.SSLMode)
	u.RawQuery = q.Encode()
	return u.String()
}

// APIURL returns the URL clients use to reach the API.
func (h HTTP) APIURL() string {
	if h.PublicURL != "" {
		return h.PublicURL
	}
	return fmt.Sprintf("http://%s", h.Addr)
}
