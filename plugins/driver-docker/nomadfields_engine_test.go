package docker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// TestEngineNomadJobInit: the task `nomad job init` writes (redis:7 with
// auth_soft_fail and a port) is accepted; with no registry reachable the
// start fails on the pull, as the pull's failure, not the config's.
func TestEngineNomadJobInit(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	cfg := newEngineTask(t, "redis", "redis:7", `{"image":"redis:7","ports":["db"],"auth_soft_fail":true,
		"auth":{"username":"u","password":"p","server_address":"registry.invalid"}}`)
	cfg.Ports = []*driverpb.PortMapping{{Label: "db", Value: 25432, To: 6379}}
	_, err := d.StartTask(ctxFor(t, 2*time.Minute), cfg)
	if err == nil {
		destroyAfter(t, d, cfg.GetId())
		t.Skip("redis:7 is present in this engine: the pull is not tried")
	}
	if !errors.Is(err, ErrImagePull) || errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `failed to pull image "redis:7"`) {
		t.Fatalf("StartTask = %v, want the pull's failure", err)
	}
}

// TestEngineNomadFieldsHonoured: fields the engine carries reach the
// container (seen from inside it); unsupported ones do not fail the start.
func TestEngineNomadFieldsHonoured(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	script := `ulimit -n; cat /proc/sys/net/core/somaxconn; df -k /dev/shm | tail -1; grep -c scratch /proc/mounts; touch /rootfs-x 2>/dev/null || echo readonly`
	cfg := newEngineTask(t, "f", busyboxImage, fmt.Sprintf(`{"image":%q,"command":"sh","args":["-c",%q],
		"ulimit":{"nofile":"1000:1000"},"sysctl":{"net.core.somaxconn":"1000"},"shm_size":8388608,
		"mount":{"type":"tmpfs","target":"/scratch","tmpfs_options":{"size":1048576}},"readonly_rootfs":true,
		"init":true,"pids_limit":100,"dns_search_domains":["example.com"],"security_opt":["no-new-privileges"],
		"tty":false,"mac_address":"","load":"","cpu_hard_limit":true}`, busyboxImage, script))
	ctx := ctxFor(t, time.Minute)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("WaitTask = %v, %v: %s", res, err, readLog(t, cfg.GetStderrPath()))
	}
	out := readLog(t, cfg.GetStdoutPath())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || lines[0] != "1000" || lines[1] != "1000" || !strings.Contains(lines[2], "8192") || lines[3] != "1" || lines[4] != "readonly" {
		t.Errorf("container saw:\n%s", out)
	}
}
