package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildExamplePlugin builds the example plugin module examples/plugins/<name>
// of the repository at root (a module of its own, so `go build` runs in its
// directory) and installs the binary as dir/<binary>. The build goes to a
// temp dir beside the test's (the same file system as a t.TempDir) and is
// then renamed over dest, so a plugin running from dest keeps its old
// executable, a reload picks up the new one, and the plugin dir never holds
// a half-written binary.
// ldflags (may be empty) are passed to -ldflags, e.g. "-X main.version=2".
func BuildExamplePlugin(root, name, dir, binary, ldflags string) (string, error) {
	dest := filepath.Join(dir, binary)
	tmp, err := os.MkdirTemp("", "drover-plugin-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, binary)
	args := []string{"build", "-o", out}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	build := exec.Command(GoTool(), append(args, ".")...)
	build.Dir = filepath.Join(root, "examples", "plugins", name)
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building example plugin %s failed: %w\n%s", name, err, b)
	}
	if err := os.Rename(out, dest); err != nil {
		return "", err
	}
	return dest, nil
}
