package config

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// Validate checks every key and returns the first problem as an *Error naming
// the key and the expected form.
func (c *Config) Validate() error {
	checks := []func() error{
		func() error { return oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error") },
		func() error { return oneOf("log.format", c.Log.Format, "", "console", "json") },
		func() error { return hostPort("http.addr", c.HTTP.Addr) },
		func() error { return optionalURL("http.public_url", c.HTTP.PublicURL) },
		func() error { return positiveDuration("http.shutdown_timeout", int64(c.HTTP.ShutdownTimeout)) },
		func() error { return positive("http.max_input_bytes", c.HTTP.MaxInputBytes) },
		func() error {
			if c.HTTP.MaxHeldInputs < 0 {
				return &Error{Key: "http.max_held_inputs", Reason: fmt.Sprintf("expected zero (no cap) or a positive integer, got %d", c.HTTP.MaxHeldInputs)}
			}
			return nil
		},
		func() error { return positive("http.max_body_bytes", c.HTTP.MaxBodyBytes) },
		func() error { return positive("http.max_upload_bytes", int(c.HTTP.MaxUploadBytes)) },
		func() error { return positiveDuration("http.read_timeout", int64(c.HTTP.ReadTimeout)) },
		func() error { return positiveDuration("http.idle_timeout", int64(c.HTTP.IdleTimeout)) },
		func() error { return positive("http.max_streams_per_token", c.HTTP.MaxStreamsPerToken) },
		func() error {
			return positiveDuration("http.token_recheck_interval", int64(c.HTTP.TokenRecheckInterval))
		},
		func() error { return nonNegativeDuration("http.token_cache_ttl", int64(c.HTTP.TokenCacheTTL)) },
		func() error { return nonEmpty("database.host", c.Database.Host) },
		func() error { return port("database.port", c.Database.Port) },
		func() error { return nonEmpty("database.user", c.Database.User) },
		func() error { return nonEmpty("database.name", c.Database.Name) },
		func() error {
			return oneOf("database.sslmode", c.Database.SSLMode, "disable", "allow", "prefer", "require", "verify-ca", "verify-full")
		},
		func() error { return positive("database.max_open_conns", c.Database.MaxOpenConns) },
		func() error { return hostPort("temporal.address", c.Temporal.Address) },
		func() error { return nonEmpty("temporal.namespace", c.Temporal.Namespace) },
		func() error { return nonEmpty("temporal.task_queue", c.Temporal.TaskQueue) },
		func() error { return optionalURL("temporal.ui_url", c.Temporal.UIURL) },
		func() error {
			return positiveDuration("temporal.resignal_interval", int64(c.Temporal.ResignalInterval))
		},
		func() error { return positiveDuration("temporal.resignal_grace", int64(c.Temporal.ResignalGrace)) },
		c.validateTLS,
		func() error { return oneOf("sandbox.backend", c.Sandbox.Backend, "local", "kubernetes") },
		c.validateKubernetes,
		func() error { return nonEmpty("sandbox.local.state_dir", c.Sandbox.Local.StateDir) },
		func() error { return positive("sandbox.local.uid_base", c.Sandbox.Local.UIDBase) },
		func() error { return positive("sandbox.local.uid_count", c.Sandbox.Local.UIDCount) },
		func() error {
			if _, err := c.Sandbox.Limits.Sandbox(); err != nil {
				return &Error{Key: "sandbox.limits", Reason: err.Error()}
			}
			return nil
		},
		c.validateOpenSandbox,
		func() error {
			if c.Sandbox.MaxLiveBoxesPerUser < 0 {
				return &Error{Key: "sandbox.max_live_boxes_per_user", Reason: fmt.Sprintf("expected zero (no cap) or a positive integer, got %d", c.Sandbox.MaxLiveBoxesPerUser)}
			}
			return nil
		},
		func() error { return nonNegativeDuration("sandbox.idle_release", int64(c.Sandbox.IdleRelease)) },
		func() error { return optionalURL("models.anthropic_base_url", c.Models.AnthropicBaseURL) },
		func() error { return optionalURL("models.openai_base_url", c.Models.OpenAIBaseURL) },
		func() error { return optionalURL("models.gemini_base_url", c.Models.GeminiBaseURL) },
		func() error {
			if c.Titles.Enabled {
				return nonEmpty("titles.model", c.Titles.Model)
			}
			return nil
		},
		func() error { return nonEmpty("dev.data_dir", c.Dev.DataDir) },
		func() error { return port("dev.postgres_port", c.Dev.PostgresPort) },
		func() error { return port("dev.temporal_port", c.Dev.TemporalPort) },
		func() error { return port("dev.temporal_ui_port", c.Dev.TemporalUIPort) },
		func() error { return port("dev.model_port", c.Dev.ModelPort) },
		func() error { return positiveDuration("startup.timeout", int64(c.Startup.Timeout)) },
		c.validateSecretsKey,
		c.validateTelemetry,
		func() error {
			if err := oneOf("temporal.versioning.behavior", c.Temporal.Versioning.Behavior, VersioningAutoUpgrade, VersioningPinned); err != nil {
				return err
			}
			if c.Temporal.Versioning.Enabled {
				return nonEmpty("temporal.versioning.deployment_name", c.Temporal.Versioning.DeploymentName)
			}
			return nil
		},
		func() error {
			if c.Temporal.WorkflowCacheSize < 0 {
				return &Error{Key: "temporal.workflow_cache_size", Reason: fmt.Sprintf("expected zero (the SDK's default) or a positive integer, got %d", c.Temporal.WorkflowCacheSize)}
			}
			return nil
		},
		func() error {
			if c.Debug.PprofAddr == "" {
				return nil
			}
			return hostPort("debug.pprof_addr", c.Debug.PprofAddr)
		},
		func() error {
			if c.Engines.Scripted.Binary != "" && !filepath.IsAbs(c.Engines.Scripted.Binary) {
				return &Error{Key: "engines.scripted.binary", Reason: "expected an absolute path"}
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateTLS() error {
	t := c.Temporal.TLS
	if !t.Enabled {
		return nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return &Error{Key: "temporal.tls.cert_file", Reason: "cert_file and key_file must be set together"}
	}
	for key, path := range map[string]string{
		"temporal.tls.cert_file": t.CertFile,
		"temporal.tls.key_file":  t.KeyFile,
		"temporal.tls.ca_file":   t.CAFile,
	} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return &Error{Key: key, Reason: fmt.Sprintf("expected a readable file, cannot stat %q", path)}
		}
	}
	return nil
}

func (c *Config) validateSecretsKey() error {
	if !c.Secrets.Key.IsSet() {
		return nil
	}
	key, err := base64.StdEncoding.DecodeString(c.Secrets.Key.Reveal())
	if err != nil || len(key) != SecretsKeyLen {
		return &Error{Key: "secrets.key", Reason: fmt.Sprintf("expected %d random bytes in standard base64 (openssl rand -base64 32)", SecretsKeyLen)}
	}
	return nil
}

func oneOf(key, value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	shown := make([]string, 0, len(allowed))
	for _, a := range allowed {
		if a != "" {
			shown = append(shown, a)
		}
	}
	return &Error{Key: key, Reason: fmt.Sprintf("expected one of %s, got %q", strings.Join(shown, ", "), value)}
}

func nonEmpty(key, value string) error {
	if strings.TrimSpace(value) == "" {
		return &Error{Key: key, Reason: "must not be empty"}
	}
	return nil
}

func positive(key string, value int) error {
	if value <= 0 {
		return &Error{Key: key, Reason: fmt.Sprintf("expected a positive integer, got %d", value)}
	}
	return nil
}

func positiveDuration(key string, value int64) error {
	if value <= 0 {
		return &Error{Key: key, Reason: "expected a positive duration such as 30s"}
	}
	return nil
}

func nonNegativeDuration(key string, value int64) error {
	if value < 0 {
		return &Error{Key: key, Reason: "expected zero or a positive duration such as 5s"}
	}
	return nil
}

func port(key string, value int) error {
	if value < 1 || value > 65535 {
		return &Error{Key: key, Reason: fmt.Sprintf("expected a port between 1 and 65535, got %d", value)}
	}
	return nil
}

func hostPort(key, value string) error {
	_, p, err := net.SplitHostPort(value)
	if err != nil {
		return &Error{Key: key, Reason: fmt.Sprintf("expected host:port, got %q", value)}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return &Error{Key: key, Reason: fmt.Sprintf("expected host:port with a numeric port, got %q", value)}
	}
	return nil
}

func optionalURL(key, value string) error {
	if value == "" {
		return nil
	}
	if !strings.HasPrefix(value, "http://") && !strings.HasPrefix(value, "https://") {
		return &Error{Key: key, Reason: fmt.Sprintf("expected an http:// or https:// URL, got %q", value)}
	}
	return nil
}

// validateOpenSandbox checks the OpenSandbox backend's settings when it is
// configured (a URL set); without a URL the rest is ignored.
func (c *Config) validateOpenSandbox() error {
	o := c.Sandbox.OpenSandbox
	if o.URL == "" {
		return nil
	}
	for _, check := range []func() error{
		func() error {
			u, err := url.Parse(o.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return &Error{Key: "sandbox.opensandbox.url", Reason: fmt.Sprintf("expected an http or https URL with the API's /v1, got %q", o.URL)}
			}
			return nil
		},
		func() error { return nonEmpty("sandbox.opensandbox.api_key", o.APIKey.Reveal()) },
		func() error {
			if len(o.RunnerKey.Reveal()) < 16 {
				return &Error{Key: "sandbox.opensandbox.runner_key", Reason: "expected at least 16 characters (openssl rand -base64 32)"}
			}
			return nil
		},
		func() error { return nonEmpty("sandbox.opensandbox.deployment", o.Deployment) },
		func() error { return port("sandbox.opensandbox.runner_port", o.RunnerPort) },
		func() error { return oneOf("sandbox.opensandbox.runner_scheme", o.RunnerScheme, "http", "https") },
		func() error { return positive("sandbox.opensandbox.program_uid", o.ProgramUID) },
		func() error { return positive("sandbox.opensandbox.program_gid", o.ProgramGID) },
		func() error { return positiveDuration("sandbox.opensandbox.ready_timeout", int64(o.ReadyTimeout)) },
		func() error { return positiveDuration("sandbox.opensandbox.request_timeout", int64(o.RequestTimeout)) },
		func() error { return positive("sandbox.opensandbox.attempts", o.Attempts) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateKubernetes checks the kubernetes backend's keys when it is selected.
func (c *Config) validateKubernetes() error {
	k := c.Sandbox.Kubernetes
	if c.Sandbox.Backend != "kubernetes" {
		return nil
	}
	if err := nonEmpty("sandbox.kubernetes.instance", k.Instance); err != nil {
		return err
	}
	if strings.TrimSpace(k.DefaultTemplate) == "" && len(k.Templates) == 0 {
		return &Error{Key: "sandbox.kubernetes.default_template", Reason: "name a SandboxTemplate (or map profiles to templates in sandbox.kubernetes.templates)"}
	}
	if len(k.RunnerCommand) == 0 || k.RunnerCommand[0] == "" {
		return &Error{Key: "sandbox.kubernetes.runner_command", Reason: "must name the runner in the box image"}
	}
	if k.RunnerPort < 1 || k.RunnerPort > 65535 {
		return &Error{Key: "sandbox.kubernetes.runner_port", Reason: fmt.Sprintf("expected a port, got %d", k.RunnerPort)}
	}
	if k.RunAsUser <= 0 {
		return &Error{Key: "sandbox.kubernetes.run_as_user", Reason: "boxes run as a non-root account: expected a positive uid"}
	}
	if _, err := sandbox.ParseBytes(k.WorkspaceSize); err != nil {
		return &Error{Key: "sandbox.kubernetes.workspace_size", Reason: err.Error()}
	}
	return positiveDuration("sandbox.kubernetes.ready_timeout", int64(k.ReadyTimeout))
}

// validateTelemetry checks the metrics listener and trace export settings.
func (c *Config) validateTelemetry() error {
	if c.Metrics.Listen != "" {
		if err := hostPort("metrics.listen", c.Metrics.Listen); err != nil {
			return err
		}
	}
	if c.Tracing.OTLPEndpoint != "" {
		if err := hostPort("tracing.otlp_endpoint", c.Tracing.OTLPEndpoint); err != nil {
			return err
		}
	}
	if c.Tracing.SampleRatio < 0 || c.Tracing.SampleRatio > 1 {
		return &Error{Key: "tracing.sample_ratio", Reason: "expected a number from 0 to 1"}
	}
	return nonEmpty("tracing.service_name", c.Tracing.ServiceName)
}
