package docker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// A task that plants /alloc/logs/<task>.stdout.1..4 as symlinks to a host
// file and then prints more than max_file_size does not get the host file
// written by the driver's log rotation: its content and mtime stay, and
// the output lands in regular log files.
func TestEngineLogRotationIgnoresPlantedLinks(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	host := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(host, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(host, old, old); err != nil {
		t.Fatal(err)
	}
	script := `for i in 1 2 3 4; do ln -sf ` + host + ` /alloc/logs/web.stdout.$i; done; ` +
		`i=0; while [ $i -lt 200 ]; do echo "line $i of the task's output, long enough to rotate"; i=$((i+1)); done`
	cfg := shTask(t, "web", script)
	cfg.LogRotation = &driverpb.LogRotation{MaxFiles: 10, MaxFileSizeBytes: 1024}
	ctx := ctxFor(t, 2*time.Minute)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, h.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("wait: %v %v", res, err)
	}
	var all strings.Builder
	waitFor(t, time.Minute, "the whole output in the log files", func() bool {
		all.Reset()
		for i := 0; i < 20; i++ {
			b, err := os.ReadFile(cfg.GetStdoutPath() + "." + strconv.Itoa(i))
			if err == nil {
				all.Write(b)
			}
		}
		return strings.Contains(all.String(), "line 199 of")
	})
	b, err := os.ReadFile(host)
	fi, serr := os.Stat(host)
	if err != nil || serr != nil || string(b) != "host secret" || !fi.ModTime().Equal(old) {
		t.Fatalf("host file written through the task's links: %q (%v), mtime %v (%v)", b, err, fi.ModTime(), serr)
	}
	for i := 1; i <= 4; i++ {
		p := cfg.GetStdoutPath() + "." + strconv.Itoa(i)
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v, want the log file in the link's place", p, fi, err)
		}
	}
}
