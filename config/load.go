package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix prefixes every environment variable AstraBox reads:
// ASTRABOX_DATABASE_PASSWORD sets database.password.
const EnvPrefix = "ASTRABOX"

// Error is a configuration problem: the key at fault and what it expects. Its
// message is one line, suitable for a start-up failure with exit code 2.
type Error struct {
	Key    string
	Reason string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return "configuration: " + e.Reason
	}
	return fmt.Sprintf("configuration: %s: %s", e.Key, e.Reason)
}

// IsConfigError reports whether err is a configuration problem.
func IsConfigError(err error) bool {
	var ce *Error
	return errors.As(err, &ce)
}

// Source says where to read configuration from besides the defaults and the
// environment.
type Source struct {
	// File is a YAML file; empty means ASTRABOX_CONFIG or none.
	File string
	// Flags are command-line flags whose names are config keys with dots replaced
	// by dashes (--http-addr sets http.addr). Only flags the user set override.
	Flags *pflag.FlagSet
	// Defaults are command-specific defaults applied over the built-in ones
	// (`astrabox dev` sets the console log format, for instance).
	Defaults map[string]any
	// Environ replaces os.Environ for tests; nil reads the process environment.
	Environ []string
}

// Load reads defaults, the YAML file, ASTRABOX_* variables and flags (later
// sources win), decodes them into a Config and validates it.
func Load(src Source) (*Config, error) {
	v := viper.New()
	for key, value := range builtinDefaults() {
		v.SetDefault(key, value)
	}
	for key, value := range src.Defaults {
		v.SetDefault(key, value)
	}
	env := environ(src.Environ)
	file := src.File
	if file == "" {
		file = env[EnvPrefix+"_CONFIG"]
	}
	if file != "" {
		v.SetConfigFile(file)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, &Error{Key: "config file", Reason: fmt.Sprintf("cannot read %s: %v", file, firstLine(err))}
		}
	}
	// Environment variables are applied explicitly rather than through
	// AutomaticEnv so tests can inject an environment and unknown ASTRABOX_*
	// variables are reported instead of silently ignored.
	known := map[string]string{}
	for _, key := range v.AllKeys() {
		known[envName(key)] = key
	}
	for name, value := range env {
		if !strings.HasPrefix(name, EnvPrefix+"_") || name == EnvPrefix+"_CONFIG" || isToolVariable(name) {
			continue
		}
		key, ok := known[name]
		if !ok {
			return nil, &Error{Key: name, Reason: "unknown environment variable (see config.example.yaml for the keys)"}
		}
		v.Set(key, value)
	}
	if src.Flags != nil {
		src.Flags.Visit(func(f *pflag.Flag) {
			if key := flagKey(v, f.Name); key != "" {
				v.Set(key, f.Value.String())
			}
		})
	}
	var cfg Config
	err := v.UnmarshalExact(&cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.StringToTimeDurationHookFunc(),
		// A list given as one string (an environment variable or a flag) is
		// split on spaces: ASTRABOX_ENGINES_CLAUDE_COMMAND="/opt/claude/claude".
		mapstructure.StringToSliceHookFunc(" "),
		secretHook,
	)))
	if err != nil {
		return nil, decodeError(err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// flagKey maps a flag name to the config key it sets: the key with dots and
// underscores written as dashes (--http-addr -> http.addr,
// --dev-temporal-ui-port -> dev.temporal_ui_port). Flags that name no key, such
// as --config, map to "".
func flagKey(v *viper.Viper, flag string) string {
	for _, key := range v.AllKeys() {
		if strings.ReplaceAll(strings.ReplaceAll(key, ".", "-"), "_", "-") == flag {
			return key
		}
	}
	return ""
}

// isToolVariable reports variables the build tooling exports that are not
// configuration keys.
func isToolVariable(name string) bool {
	switch name {
	case EnvPrefix + "_REPO_ROOT", EnvPrefix + "_TEMPORAL_BIN":
		return true
	}
	return false
}

func envName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func environ(list []string) map[string]string {
	if list == nil {
		list = os.Environ()
	}
	out := make(map[string]string, len(list))
	for _, kv := range list {
		if name, value, ok := strings.Cut(kv, "="); ok {
			out[name] = value
		}
	}
	return out
}

// secretHook decodes strings into Secret without going through their printable form.
func secretHook(from reflect.Type, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(Secret("")) || from.Kind() != reflect.String {
		return data, nil
	}
	return Secret(reflect.ValueOf(data).String()), nil
}

// decodeError turns mapstructure's multi-line report into a one-line Error
// naming the first key at fault, without echoing values (they may be secrets).
func decodeError(err error) error {
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "*"))
		if !strings.HasPrefix(line, "'") {
			continue
		}
		end := strings.Index(line[1:], "'")
		if end < 0 {
			continue
		}
		key, rest := line[1:end+1], line[end+2:]
		if _, names, ok := strings.Cut(rest, "has invalid keys: "); ok {
			first, _, _ := strings.Cut(names, ",")
			if key != "" {
				first = key + "." + strings.TrimSpace(first)
			}
			return &Error{Key: first, Reason: "unknown key (see config.example.yaml for the keys)"}
		}
		return &Error{Key: key, Reason: expectedForm(rest)}
	}
	return &Error{Reason: "cannot decode configuration"}
}

func expectedForm(detail string) string {
	switch {
	case strings.Contains(detail, "time.Duration"), strings.Contains(detail, "duration"):
		return "expected a duration such as 30s or 5m"
	case strings.Contains(detail, "'int'"), strings.Contains(detail, "ParseInt"):
		return "expected an integer"
	case strings.Contains(detail, "'bool'"), strings.Contains(detail, "ParseBool"):
		return "expected true or false"
	}
	return "invalid value"
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// builtinDefaults are the values every key takes when nothing sets it. Keys not
// listed here are unknown and refused.
func builtinDefaults() map[string]any {
	return map[string]any{
		"log.level":                           "info",
		"log.format":                          "",
		"http.addr":                           "127.0.0.1:8080",
		"http.public_url":                     "",
		"http.shutdown_timeout":               10 * time.Second,
		"http.max_input_bytes":                256 * 1024,
		"http.max_held_inputs":                0,
		"http.max_body_bytes":                 1 << 20,
		"http.max_upload_bytes":               256 << 20,
		"http.read_timeout":                   30 * time.Second,
		"http.idle_timeout":                   2 * time.Minute,
		"http.max_streams_per_token":          16,
		"http.token_recheck_interval":         30 * time.Second,
		"http.token_cache_ttl":                5 * time.Second,
		"database.host":                       "127.0.0.1",
		"database.port":                       5432,
		"database.user":                       "astrabox",
		"database.password":                   "",
		"database.name":                       "astrabox",
		"database.sslmode":                    "disable",
		"database.max_open_conns":             20,
		"temporal.address":                    "127.0.0.1:7233",
		"temporal.namespace":                  "default",
		"temporal.task_queue":                 "astrabox",
		"temporal.ui_url":                     "",
		"temporal.resignal_interval":          30 * time.Second,
		"temporal.resignal_grace":             30 * time.Second,
		"temporal.tls.enabled":                false,
		"temporal.tls.cert_file":              "",
		"temporal.tls.key_file":               "",
		"temporal.tls.ca_file":                "",
		"temporal.tls.server_name":            "",
		"temporal.api_key":                    "",
		"sandbox.backend":                     "local",
		"sandbox.local.state_dir":             "var/sandboxes",
		"sandbox.local.uid_base":              200000,
		"sandbox.local.uid_count":             10000,
		"sandbox.local.runner_path":           "",
		"sandbox.kubernetes.namespace":        "",
		"sandbox.kubernetes.kubeconfig":       "",
		"sandbox.kubernetes.instance":         "astrabox",
		"sandbox.kubernetes.default_template": "astrabox-box",
		"sandbox.kubernetes.templates":        map[string]string{},
		"sandbox.kubernetes.box_container":    "",
		"sandbox.kubernetes.runner_command":   []string{"/usr/local/bin/astrabox-runner"},
		"sandbox.kubernetes.runner_port":      7070,
		"sandbox.kubernetes.run_as_user":      1000,
		"sandbox.kubernetes.storage_class":    "",
		"sandbox.kubernetes.workspace_size":   "10Gi",
		"sandbox.kubernetes.ready_timeout":    5 * time.Minute,

		"sandbox.opensandbox.url":              "",
		"sandbox.opensandbox.api_key":          "",
		"sandbox.opensandbox.runner_key":       "",
		"sandbox.opensandbox.deployment":       "astrabox",
		"sandbox.opensandbox.ca_file":          "",
		"sandbox.opensandbox.entrypoint":       []string{},
		"sandbox.opensandbox.runner_port":      9494,
		"sandbox.opensandbox.runner_scheme":    "http",
		"sandbox.opensandbox.use_server_proxy": false,
		"sandbox.opensandbox.program_uid":      1000,
		"sandbox.opensandbox.program_gid":      1000,
		"sandbox.opensandbox.ready_timeout":    "3m",
		"sandbox.opensandbox.request_timeout":  "30s",
		"sandbox.opensandbox.attempts":         5,
		"temporal.workflow_cache_size":         0,
		// Room for Claude Code and the builds and tests its tools run, on one core.
		"sandbox.limits.cpu":              "1",
		"sandbox.limits.memory":           "2Gi",
		"sandbox.limits.pids":             1024,
		"sandbox.limits.tmp":              "512Mi",
		"sandbox.max_live_boxes_per_user": 8,
		"sandbox.idle_release":            "30m",
		"models.anthropic_api_key":        "",
		"models.anthropic_base_url":       "https://api.anthropic.com",
		"models.openai_api_key":           "",
		"models.openai_base_url":          "https://api.openai.com",
		"models.gemini_api_key":           "",
		"models.gemini_base_url":          "https://generativelanguage.googleapis.com",
		"titles.enabled":                  false,
		"titles.model":                    "claude-haiku-4-5",
		"engines.claude.command":          []string{},
		"engines.codex.command":           []string{},
		"engines.codex.model":             "",
		"engines.codex.features":          []string{},
		"engines.pi.command":              []string{},
		"engines.pi.model":                "",
		"engines.scripted.binary":         "",
		"debug.pprof_addr":                "",
		"dev.data_dir":                    "var",
		"dev.postgres_port":               15432,
		"dev.temporal_port":               7233,
		"dev.temporal_ui_port":            8233,
		"dev.temporal_bin":                "",
		"dev.model_port":                  18090,
		"dev.titles":                      true,
		"startup.timeout":                 30 * time.Second,
		"secrets.key":                     "",

		// Worker Deployment Versioning and telemetry (docs/deploy.md, docs/observability.md).
		"temporal.versioning.enabled":         false,
		"temporal.versioning.deployment_name": "astrabox",
		"temporal.versioning.build_id":        "",
		"temporal.versioning.behavior":        "auto_upgrade",
		"metrics.listen":                      ":9464",
		"tracing.otlp_endpoint":               "",
		"tracing.otlp_insecure":               false,
		"tracing.service_name":                "astrabox",
		"tracing.sample_ratio":                1.0,
	}
}
