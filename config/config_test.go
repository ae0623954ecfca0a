package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "astrabox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := Load(Source{Environ: []string{}})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", cfg.HTTP.Addr)
	assert.Equal(t, 30*time.Second, cfg.Startup.Timeout)
	assert.Equal(t, "local", cfg.Sandbox.Backend)
	assert.False(t, cfg.Titles.Enabled, "automatic titles are asked for in configuration")

	cfg, err = Load(Source{Environ: []string{"ASTRABOX_TITLES_ENABLED=true"}})
	require.NoError(t, err)
	assert.True(t, cfg.Titles.Enabled)
	assert.Equal(t, "claude-haiku-4-5", cfg.Titles.Model)
}

func TestPrecedenceFileEnvFlag(t *testing.T) {
	file := writeYAML(t, "http:\n  addr: 127.0.0.1:9000\nlog:\n  level: debug\ntemporal:\n  namespace: from-file\n")
	flags := pflag.NewFlagSet("test", pflag.ContinueOnError)
	flags.String("http-addr", "", "")
	flags.String("temporal-namespace", "", "")
	require.NoError(t, flags.Parse([]string{"--temporal-namespace", "from-flag"}))

	cfg, err := Load(Source{
		File:    file,
		Flags:   flags,
		Environ: []string{"ASTRABOX_HTTP_ADDR=127.0.0.1:9100", "ASTRABOX_TEMPORAL_NAMESPACE=from-env"},
	})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9100", cfg.HTTP.Addr, "environment beats file")
	assert.Equal(t, "debug", cfg.Log.Level, "file beats defaults")
	assert.Equal(t, "from-flag", cfg.Temporal.Namespace, "flag beats environment")
}

func TestConfigFileFromEnvironment(t *testing.T) {
	file := writeYAML(t, "dev:\n  temporal_ui_port: 9233\n")
	cfg, err := Load(Source{Environ: []string{"ASTRABOX_CONFIG=" + file}})
	require.NoError(t, err)
	assert.Equal(t, 9233, cfg.Dev.TemporalUIPort)
}

func TestCommandDefaults(t *testing.T) {
	cfg, err := Load(Source{Environ: []string{}, Defaults: map[string]any{"log.format": "console"}})
	require.NoError(t, err)
	assert.Equal(t, "console", cfg.Log.Format)
}

func TestValidationNamesTheKey(t *testing.T) {
	cases := []struct {
		name    string
		environ []string
		yaml    string
		key     string
		want    string
	}{
		{name: "bad level", environ: []string{"ASTRABOX_LOG_LEVEL=loud"}, key: "log.level", want: "expected one of debug, info, warn, error"},
		{name: "bad port", environ: []string{"ASTRABOX_DATABASE_PORT=70000"}, key: "database.port", want: "between 1 and 65535"},
		{name: "port not a number", environ: []string{"ASTRABOX_DATABASE_PORT=abc"}, key: "database.port", want: "expected an integer"},
		{name: "bad duration", environ: []string{"ASTRABOX_STARTUP_TIMEOUT=soon"}, key: "startup.timeout", want: "duration"},
		{name: "bad addr", environ: []string{"ASTRABOX_HTTP_ADDR=8080"}, key: "http.addr", want: "host:port"},
		{name: "bad sslmode", environ: []string{"ASTRABOX_DATABASE_SSLMODE=maybe"}, key: "database.sslmode", want: "expected one of"},
		{name: "unknown env", environ: []string{"ASTRABOX_HTTP_ADRR=x"}, key: "ASTRABOX_HTTP_ADRR", want: "unknown environment variable"},
		{name: "unknown yaml key", yaml: "http:\n  adr: x\n", key: "http.adr", want: "unknown key"},
		{name: "bad backend", environ: []string{"ASTRABOX_SANDBOX_BACKEND=cloud"}, key: "sandbox.backend", want: "expected one of local, kubernetes"},
		{name: "tls files missing", environ: []string{"ASTRABOX_TEMPORAL_TLS_ENABLED=true", "ASTRABOX_TEMPORAL_TLS_CA_FILE=/nonexistent/ca.pem"}, key: "temporal.tls.ca_file", want: "readable file"},
		{name: "short secrets key", environ: []string{"ASTRABOX_SECRETS_KEY=c2hvcnQ="}, key: "secrets.key", want: "32 random bytes"},
		{name: "bad read timeout", environ: []string{"ASTRABOX_HTTP_READ_TIMEOUT=0s"}, key: "http.read_timeout", want: "positive duration"},
		{name: "negative token cache ttl", environ: []string{"ASTRABOX_HTTP_TOKEN_CACHE_TTL=-1s"}, key: "http.token_cache_ttl", want: "zero or a positive duration"},
		{name: "bad memory limit", environ: []string{"ASTRABOX_SANDBOX_LIMITS_MEMORY=lots"}, key: "sandbox.limits", want: "not a byte quantity"},
		{name: "bad cpu limit", environ: []string{"ASTRABOX_SANDBOX_LIMITS_CPU=-1"}, key: "sandbox.limits", want: "out of range"},
		{name: "negative box cap", environ: []string{"ASTRABOX_SANDBOX_MAX_LIVE_BOXES_PER_USER=-1"}, key: "sandbox.max_live_boxes_per_user", want: "zero (no cap)"},
		{name: "negative idle release", environ: []string{"ASTRABOX_SANDBOX_IDLE_RELEASE=-1m"}, key: "sandbox.idle_release", want: "zero or a positive duration"},
		{name: "negative workflow cache", environ: []string{"ASTRABOX_TEMPORAL_WORKFLOW_CACHE_SIZE=-1"}, key: "temporal.workflow_cache_size", want: "zero (the SDK's default)"},
		{name: "debug address without port", environ: []string{"ASTRABOX_DEBUG_PPROF_ADDR=localhost"}, key: "debug.pprof_addr", want: "host:port"},
		{name: "relative scripted program", environ: []string{"ASTRABOX_ENGINES_SCRIPTED_BINARY=bin/scriptagent"}, key: "engines.scripted.binary", want: "absolute path"},
		{name: "bad url", environ: []string{"ASTRABOX_MODELS_ANTHROPIC_BASE_URL=api.example"}, key: "models.anthropic_base_url", want: "http:// or https://"},
		{name: "opensandbox without a key", environ: []string{"ASTRABOX_SANDBOX_OPENSANDBOX_URL=https://osb.example/v1"}, key: "sandbox.opensandbox.api_key", want: "must not be empty"},
		{name: "opensandbox short runner key", environ: []string{"ASTRABOX_SANDBOX_OPENSANDBOX_URL=https://osb.example/v1", "ASTRABOX_SANDBOX_OPENSANDBOX_API_KEY=k", "ASTRABOX_SANDBOX_OPENSANDBOX_RUNNER_KEY=short"}, key: "sandbox.opensandbox.runner_key", want: "16 characters"},
		{name: "opensandbox bad url", environ: []string{"ASTRABOX_SANDBOX_OPENSANDBOX_URL=osb.example"}, key: "sandbox.opensandbox.url", want: "http or https URL"},
		{name: "kubernetes without a template", environ: []string{"ASTRABOX_SANDBOX_BACKEND=kubernetes", "ASTRABOX_SANDBOX_KUBERNETES_DEFAULT_TEMPLATE="}, key: "sandbox.kubernetes.default_template", want: "name a SandboxTemplate"},
		{name: "kubernetes boxes as root", environ: []string{"ASTRABOX_SANDBOX_BACKEND=kubernetes", "ASTRABOX_SANDBOX_KUBERNETES_RUN_AS_USER=0"}, key: "sandbox.kubernetes.run_as_user", want: "non-root"},
		{name: "kubernetes runner port", environ: []string{"ASTRABOX_SANDBOX_BACKEND=kubernetes", "ASTRABOX_SANDBOX_KUBERNETES_RUNNER_PORT=0"}, key: "sandbox.kubernetes.runner_port", want: "expected a port"},
		{name: "kubernetes workspace size", environ: []string{"ASTRABOX_SANDBOX_BACKEND=kubernetes", "ASTRABOX_SANDBOX_KUBERNETES_WORKSPACE_SIZE=big"}, key: "sandbox.kubernetes.workspace_size", want: "byte quantity"},
		{name: "bad metrics listener", environ: []string{"ASTRABOX_METRICS_LISTEN=9464"}, key: "metrics.listen", want: "host:port"},
		{name: "bad otlp endpoint", environ: []string{"ASTRABOX_TRACING_OTLP_ENDPOINT=http://collector"}, key: "tracing.otlp_endpoint", want: "host:port"},
		{name: "sample ratio above 1", environ: []string{"ASTRABOX_TRACING_SAMPLE_RATIO=2"}, key: "tracing.sample_ratio", want: "from 0 to 1"},
		{name: "bad versioning behavior", environ: []string{"ASTRABOX_TEMPORAL_VERSIONING_BEHAVIOR=sticky"}, key: "temporal.versioning.behavior", want: "expected one of"},
		{name: "versioning without a deployment", environ: []string{"ASTRABOX_TEMPORAL_VERSIONING_ENABLED=true", "ASTRABOX_TEMPORAL_VERSIONING_DEPLOYMENT_NAME="}, key: "temporal.versioning.deployment_name", want: "must not be empty"},
		{name: "titles without a model", environ: []string{"ASTRABOX_TITLES_ENABLED=true", "ASTRABOX_TITLES_MODEL="}, key: "titles.model", want: "must not be empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{Environ: tc.environ}
			if tc.yaml != "" {
				src.File = writeYAML(t, tc.yaml)
			}
			if src.Environ == nil {
				src.Environ = []string{}
			}
			_, err := Load(src)
			require.Error(t, err)
			require.True(t, IsConfigError(err), "want a configuration error, got %T", err)
			assert.Contains(t, err.Error(), tc.key)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

func TestMissingConfigFile(t *testing.T) {
	_, err := Load(Source{File: "/nonexistent/astrabox.yaml", Environ: []string{}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config file")
}

func TestSecretsNeverPrint(t *testing.T) {
	const password = "hunter2-very-secret"
	cfg, err := Load(Source{Environ: []string{
		"ASTRABOX_DATABASE_PASSWORD=" + password,
		"ASTRABOX_MODELS_ANTHROPIC_API_KEY=sk-ant-" + password,
	}})
	require.NoError(t, err)
	assert.Equal(t, password, cfg.Database.Password.Reveal())
	assert.Contains(t, cfg.Database.DSN(), password)

	encoded, err := json.Marshal(cfg)
	require.NoError(t, err)
	for _, shown := range []string{
		fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
		string(encoded), cfg.Database.RedactedDSN(),
	} {
		assert.NotContains(t, shown, password)
	}
	assert.Contains(t, cfg.Database.RedactedDSN(), "redacted")
}

func TestSecretInBadValueIsNotEchoed(t *testing.T) {
	// A value that fails to decode must not be echoed: it could be a secret put
	// under the wrong key.
	_, err := Load(Source{Environ: []string{"ASTRABOX_DATABASE_PORT=s3cr3t-token"}})
	require.Error(t, err)
	assert.False(t, strings.Contains(err.Error(), "s3cr3t-token"), err.Error())
}

func TestListFromEnvironment(t *testing.T) {
	cfg, err := Load(Source{Environ: []string{"ASTRABOX_ENGINES_CLAUDE_COMMAND=/opt/claude/claude --verbose"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"/opt/claude/claude", "--verbose"}, cfg.Engines.Claude.Command)
}
