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
