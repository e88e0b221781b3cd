package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// The engine tests run against the local Docker engine and skip, with the
// reason, when there is none. Their images are built here, from files on
// this machine, since no registry is reachable.
const (
	busyboxImage = "drover-test/busybox:latest"
	memhogImage  = "drover-test/memhog:latest"
	busyboxPath  = "/bin/busybox" // Debian's busybox-static
)

var (
	imagesOnce sync.Once
	imagesErr  error
	engineCli  *client.Client
)

// needEngine skips the test without a reachable engine and builds the
// test images once per test binary.
func needEngine(t testing.TB) *client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("docker engine tests are skipped in -short mode")
	}
	imagesOnce.Do(func() {
		cli, err := client.New(client.WithHostFromEnv())
		if err != nil {
			imagesErr = fmt.Errorf("docker client: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			imagesErr = fmt.Errorf("no docker engine reachable at %s: %v", cli.DaemonHost(), err)
			return
		}
		engineCli = cli
		imagesErr = buildTestImages(cli)
	})
	if imagesErr != nil {
		t.Skipf("skipping docker engine test: %v", imagesErr)
	}
	return engineCli
}

func buildTestImages(cli *client.Client) error {
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		return fmt.Errorf("%s is needed to build the test image (apt-get install busybox-static): %v", busyboxPath, err)
	}
	if err := buildImage(cli, busyboxImage, map[string][]byte{
		"Dockerfile": []byte("FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nENV PATH=/bin\n"),
		"busybox":    bb,
	}); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "drover-memhog")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "memhog")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/memhog")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build memhog: %v: %s", err, out)
	}
	hog, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	return buildImage(cli, memhogImage, map[string][]byte{
		"Dockerfile": []byte("FROM scratch\nCOPY memhog /memhog\nENTRYPOINT [\"/memhog\"]\n"),
		"memhog":     hog,
	})
}

// buildImage builds an image from an in-memory context through the
// engine's build API.
func buildImage(cli *client.Client, tag string, files map[string][]byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	if bytes.Contains(out, []byte(`"errorDetail"`)) {
		return fmt.Errorf("build %s: %s", tag, out)
	}
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		return fmt.Errorf("build %s: image missing afterwards: %v (%s)", tag, err, out)
	}
	return nil
}

// newEngineDriver is a driver on the default engine that keeps images.
func newEngineDriver(t *testing.T, extra string) *Driver {
	t.Helper()
	cfg, err := ParsePluginConfig([]byte(`{"gc":{"image":false}` + extra + `}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Shutdown)
	return d
}

// taskDirs lays out an alloc dir as the client does and returns a task
// config for it, with rotated logs in alloc/logs.
func newEngineTask(t testing.TB, name, image string, config string) *driverpb.TaskConfig {
	t.Helper()
	root := t.TempDir()
	allocID := fmt.Sprintf("%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
	for _, d := range []string{"alloc/logs", name + "/local", name + "/secrets"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if config == "" {
		config = `{"image":"` + image + `"}`
	}
	return &driverpb.TaskConfig{
		Id: allocID + "/" + name, AllocId: allocID, TaskName: name,
		ConfigJson: []byte(config),
		Env:        map[string]string{"NOMAD_ALLOC_DIR": filepath.Join(root, "alloc"), "NOMAD_TASK_NAME": name, "PATH": "/usr/bin"},
		AllocDir:   root, TaskDir: filepath.Join(root, name),
		StdoutPath:  filepath.Join(root, "alloc/logs", name+".stdout"),
		StderrPath:  filepath.Join(root, "alloc/logs", name+".stderr"),
		LogRotation: &driverpb.LogRotation{MaxFiles: 3, MaxFileSizeBytes: 1 << 20},
		Resources:   &driverpb.Resources{Cpu: 100, MemoryMb: 64},
	}
}

func shTask(t testing.TB, name, script string) *driverpb.TaskConfig {
	t.Helper()
	return newEngineTask(t, name, busyboxImage, fmt.Sprintf(`{"image":%q,"command":"sh","args":["-c",%q]}`, busyboxImage, script))
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// destroyAfter removes the task's container at the end of the test.
func destroyAfter(t *testing.T, d driver.Driver, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.DestroyTask(ctx, id, true); err != nil && !errors.Is(err, driver.ErrTaskNotFound) {
			t.Errorf("destroy %s: %v", id, err)
		}
	})
}

func readLog(t *testing.T, base string) string {
	t.Helper()
	b, err := os.ReadFile(base + ".0")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// containersOf lists the engine's containers (running or not) of a task.
func containersOf(t *testing.T, cli *client.Client, cfg *driverpb.TaskConfig) int {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelAllocID+"="+cfg.GetAllocId(), LabelTaskName+"="+cfg.GetTaskName())})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Items)
}
