// Package boximage builds the box images defined under deploy/images (one per
// built-in Agent program) through deploy/images/build.sh, the script `make images`
// runs, and says where each image's OCI layout and unpacked root filesystem are.
// The script reuses a build whose inputs are unchanged, so asking for an image
// twice costs one build.
package boximage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Names of the images deploy/images defines.
const (
	ClaudeCode = "claude-code"
	Codex      = "codex"
	Pi         = "pi"
	ACP        = "acp"
)

// Image is a built image.
type Image struct {
	// Name is the image's folder under deploy/images.
	Name string
	// Dir holds everything the build made (var/images/<name>).
	Dir string
	// Layout is the OCI image layout; the image is tagged with its Name.
	Layout string
	// Rootfs is the image unpacked: the root a local box runs on.
	Rootfs string
	// Digests is digests.txt: the manifest, config and layer digests.
	Digests string
}

// Dir is where images built from the checkout at root are kept.
func Dir(root string) string { return filepath.Join(root, "var", "images") }

// Build builds image (or reuses its last build) from the checkout at root and
// returns it. The script's output is returned in the error when it fails.
func Build(ctx context.Context, root, name string) (Image, error) {
	out := filepath.Join(Dir(root), name)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "images", "build.sh"), name, out)
	cmd.Dir = root
	cmd.Env = os.Environ()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return Image{}, fmt.Errorf("build image %s: %w: %s", name, err, tail(log.String(), 3000))
	}
	img := Image{Name: name, Dir: out, Layout: filepath.Join(out, "oci"), Rootfs: filepath.Join(out, "rootfs")}
	// The script's last line names the root it made; trust it over the convention.
	sc := bufio.NewScanner(&log)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "rootfs: "); ok {
			img.Rootfs = p
		}
	}
	digests, err := os.ReadFile(filepath.Join(out, "digests.txt"))
	if err != nil {
		return Image{}, fmt.Errorf("build image %s: %w", name, err)
	}
	img.Digests = string(digests)
	return img, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
