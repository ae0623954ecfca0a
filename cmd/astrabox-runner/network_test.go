package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// TestNetworkConfigKeepsRunnerSettingsFromPrograms: in an image, the runner's
// settings come from ASTRABOX_RUNNER_* and never reach the box environment its
// processes get; every other variable does.
func TestNetworkConfigKeepsRunnerSettingsFromPrograms(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "workspace")
	cfg, err := networkConfig(":9494", []string{
		runnerapi.EnvToken + "=0123456789abcdef0123", runnerapi.EnvWorkspace + "=" + ws,
		runnerapi.EnvProgramUID + "=1000", runnerapi.EnvProgramGID + "=1000", "PATH=/usr/bin", "HOME=/workspace/.home",
	})
	if os.Getuid() != 0 && err != nil {
		t.Skipf("chown to the program account needs root: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Token != "0123456789abcdef0123" || cfg.ListenTCP != ":9494" || cfg.ProgramUID != 1000 || cfg.Workspace != ws {
		t.Fatalf("config %+v", cfg)
	}
	for k := range cfg.Env {
		if len(k) >= len(runnerapi.EnvPrefix) && k[:len(runnerapi.EnvPrefix)] == runnerapi.EnvPrefix {
			t.Fatalf("%s reaches the programs' environment", k)
		}
	}
	if cfg.Env["PATH"] != "/usr/bin" || cfg.Env["HOME"] != "/workspace/.home" {
		t.Fatalf("box environment %v", cfg.Env)
	}
	st, err := os.Stat(ws)
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 1000 {
		t.Fatalf("the workspace belongs to %d, not the program account", uid)
	}

	for _, environ := range [][]string{
		{runnerapi.EnvToken + "=short"},
		{runnerapi.EnvToken + "=0123456789abcdef0123", runnerapi.EnvProgramUID + "=agent"},
	} {
		if _, err := networkConfig(":9494", environ); err == nil {
			t.Fatalf("%v accepted", environ)
		}
	}
}

// TestNetworkConfigTunnelsTheBoxForwards: ASTRABOX_RUNNER_FORWARDS makes the
// runner listen on each forward's loopback port for the egress tunnel and keep
// the value for the worker; a list that is not valid JSON or not valid forwards
// stops the runner.
func TestNetworkConfigTunnelsTheBoxForwards(t *testing.T) {
	const token = runnerapi.EnvToken + "=0123456789abcdef0123"
	const forwards = `[{"name":"model","port":47080},{"name":"tracing","port":47082,"upstream":"https://otel.example.com","paths":["/v1/traces"]}]`
	cfg, err := networkConfig(":9494", []string{token, runnerapi.EnvForwards + "=" + forwards})
	if err != nil {
		t.Fatal(err)
	}
	want := []runnerapi.Tunnel{{Name: "model", Listen: "127.0.0.1:47080"}, {Name: "tracing", Listen: "127.0.0.1:47082"}}
	if len(cfg.Tunnels) != 2 || cfg.Tunnels[0] != want[0] || cfg.Tunnels[1] != want[1] || cfg.TunnelForwards != forwards {
		t.Fatalf("tunnels %+v, forwards %q", cfg.Tunnels, cfg.TunnelForwards)
	}
	if _, ok := cfg.Env[runnerapi.EnvForwards]; ok {
		t.Fatal("the forwards reach the programs' environment")
	}
	for _, bad := range []string{`not json`, `[{"name":"model","port":0}]`, `[{"name":"a","port":1},{"name":"b","port":1}]`,
		`[{"name":"../x","port":1}]`} {
		if _, err := networkConfig(":9494", []string{token, runnerapi.EnvForwards + "=" + bad}); err == nil {
			t.Fatalf("forwards %s accepted", bad)
		}
	}
}
