package docker

import (
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/test/internal/harness"
)

// busyboxPath is where Debian's busybox-static installs its binary; the
// image's /bin/sh, sleep and true are links to it.
const busyboxPath = "/bin/busybox"

var (
	// skipReason says why this machine cannot run the suite (no Docker
	// engine, no static busybox); every test skips with it.
	skipReason string
	// setupErr is a failure to prepare a machine that can run the suite:
	// every test fails with it, since it is a bug, not a missing tool.
	setupErr error
	// runID names this run's image, containers and networks.
	runID string
	// image is the drover image this run built (drover-e2e:<runID>).
	image string
)

// TestMain builds one image for the whole run and removes everything the
// run created afterwards, whatever happened. A run that finds leftovers of
// an earlier run that died (labelled, owner gone) removes them first.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testtier.SkipSuite("test/docker runs drover agents in containers on a Docker engine") {
		return 0
	}
	if err := dockerAvailable(); err != nil {
		skipReason = fmt.Sprintf("docker tests need a Docker engine: `docker info` failed: %v", err)
		return m.Run()
	}
	if err := staticBinary(busyboxPath); err != nil {
		skipReason = fmt.Sprintf("docker tests need a static busybox at %s (apt-get install busybox-static): %v", busyboxPath, err)
		return m.Run()
	}
	runID = randomID()
	if err := removeLeftovers(); err != nil {
		fmt.Fprintf(os.Stderr, "docker: removing leftovers of earlier runs: %v\n", err)
	}
	defer func() {
		if err := removeRun(runID); err != nil {
			fmt.Fprintf(os.Stderr, "docker: cleanup of run %s: %v\n", runID, err)
		}
	}()
	start := time.Now()
	image, setupErr = buildImage(runID)
	if setupErr == nil {
		fmt.Fprintf(os.Stderr, "docker: built image %s in %s\n", image, time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	// Every docker CLI run and HTTP connection ends with its test; a
	// goroutine still alive here is a leak in the harness.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "docker: goroutine leak: %v\n", err)
			code = 1
		}
	}
	return code
}

// needDocker skips the test when the machine cannot run the suite, and
// fails it when the image could not be built.
func needDocker(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if setupErr != nil {
		t.Fatalf("docker test setup failed: %v", setupErr)
	}
}

// staticBinary checks that path is an ELF executable that needs no
// dynamic loader: an image FROM scratch has no libc for it.
func staticBinary(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically", path)
		}
	}
	return nil
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// buildImage builds a static drover and an image FROM scratch around it
// and busybox: nothing is pulled, so the suite runs with no registry.
func buildImage(id string) (string, error) {
	root, err := harness.ModuleRoot()
	if err != nil {
		return "", err
	}
	ctxDir, err := os.MkdirTemp("", "drover-docker-ctx-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(ctxDir)
	bin := filepath.Join(ctxDir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	build := exec.Command(harness.GoTool(), "build", "-o", filepath.Join(bin, "drover"), "./cmd/drover")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("static build of drover: %w\n%s", err, out)
	}
	if err := copyFile(busyboxPath, filepath.Join(bin, "busybox")); err != nil {
		return "", err
	}
	// COPY keeps symlinks, so one busybox serves every applet a task uses.
	for _, applet := range []string{"sh", "sleep", "true"} {
		if err := os.Symlink("busybox", filepath.Join(bin, applet)); err != nil {
			return "", err
		}
	}
	// go-plugin puts its sockets in /tmp, and a scratch image has none.
	tmp := filepath.Join(ctxDir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o1777); err != nil {
		return "", err
	}
	dockerfile := "FROM scratch\nCOPY bin/ /bin/\nCOPY tmp/ /tmp/\nENV PATH=/bin\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	tag := imageRepo + ":" + id
	args := append([]string{"build", "-q", "-t", tag}, labelArgs(id)...)
	if _, err := dockerWith(buildTimeout, append(args, ctxDir)...); err != nil {
		return "", err
	}
	return tag, nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		return errors.Join(fmt.Errorf("copy %s", from), err)
	}
	return nil
}
