package conformance_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// buildOneshot builds the example third-party plugin (its own module,
// examples/plugins/oneshot) into a temporary directory.
func buildOneshot(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds examples/plugins/oneshot and runs it as a process (full tier: go test without -short)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		} else {
			t.Skipf("no go tool on PATH to build the example plugin: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "scheduler-oneshot")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "..", "examples", "plugins", "oneshot")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", build.Dir, err, out)
	}
	return bin
}

// The kit drives a plugin binary over its socket: the example plugin,
// started as the agent starts it, conforms, and is stopped when the test
// ends.
func TestLaunch(t *testing.T) {
	bin := buildOneshot(t)

	rec := &recorder{}
	p := conformance.Start(rec, exec.Command(bin))
	info, err := p.Scheduler.Info(t.Context())
	if err != nil || info.GetName() != "scheduler-oneshot" {
		t.Fatalf("Info over the socket = %v, %v; want the example plugin's", info, err)
	}
	if p.Conn == nil {
		t.Error("Start returned no gRPC connection")
	}
	for _, f := range conformance.Check(p.Scheduler, conformance.Options{}) {
		t.Errorf("%s", f)
	}
	if p.Client.Exited() {
		t.Fatal("the plugin exited while the kit ran")
	}
	rec.close()
	if !p.Client.Exited() {
		t.Error("the plugin is still running after the test's cleanup")
	}
	if len(rec.errs) > 0 {
		t.Errorf("Start reported errors: %q", rec.errs)
	}

	// Launch is Start's scheduler, for conformance.Run.
	s := conformance.Launch(t, exec.Command(bin))
	conformance.Run(t, s, conformance.Options{InProcess: true})
}

// A binary that does not speak go-plugin's handshake fails the test with
// what it printed instead.
func TestLaunchNotAPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a process (full tier: go test without -short)")
	}
	rec := &recorder{}
	defer rec.close()
	msg := func() (msg any) {
		defer func() { msg = recover() }()
		conformance.Launch(rec, exec.Command("/bin/sh", "-c", "echo hello from a shell"))
		return nil
	}()
	text, _ := msg.(string)
	if !strings.Contains(text, "conformance: launch /bin/sh") || !strings.Contains(text, "hello from a shell") {
		t.Errorf("Launch of a shell script failed with %q; want a fatal error naming the binary and what it printed", msg)
	}
}
