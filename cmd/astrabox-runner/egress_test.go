package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox/egress"
)

// TestEgressReadsItsConfigurationFromAFile runs the forwarder as a Kubernetes
// box's sidecar does, with -config naming the file its Secret is mounted as:
// the route's socket serves the upstream with the credential added.
func TestEgressReadsItsConfigurationFromAFile(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path+" key="+r.Header.Get("X-Api-Key"))
	}))
	defer upstream.Close()
	dir := t.TempDir()
	bin := filepath.Join(dir, "astrabox-runner")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	sockets := filepath.Join(dir, "egress")
	if err := os.Mkdir(sockets, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := egress.ForwarderConfig{Dir: sockets, UID: os.Getuid(), GID: os.Getgid(), Routes: map[string]egress.Route{
		"model": {Upstream: upstream.URL, Headers: map[string]string{"X-Api-Key": "real-key"}, Paths: []string{"/v1/messages"}}}}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "forwarder.json")
	if err := os.WriteFile(file, raw, 0o400); err != nil {
		t.Fatal(err)
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "egress", "-config", file, "-ready-fd", "3")
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Stdin = strings.NewReader("not the configuration")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(ready).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("forwarder not ready: %q %v", line, err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(sockets, "model.sock"))
	}}, Timeout: 10 * time.Second}
	resp, err := client.Get("http://model/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := string(body); got != "/v1/messages key=real-key" {
		t.Fatalf("through the forwarder: %q", got)
	}
}
