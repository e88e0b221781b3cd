package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// The test binary doubles as the plugin binary: when the host re-executes it
// with pluginEnv set, TestMain serves a fake scheduler instead of running
// tests. This gives the tests real subprocesses, real handshakes and real
// crashes without building anything.
const (
	pluginEnv = "DROVER_PLUGINHOST_TEST_PLUGIN" // fake mode: "a", "b" or "empty"
	dirEnv    = "DROVER_PLUGINHOST_TEST_DIR"    // where "hold" evals meet the test
	// baseEnv says whether and how the fake serves the base protocol
	// (basefake_test.go): unset, no Base service at all.
	baseEnv = "DROVER_PLUGINHOST_TEST_BASE"
)

// modeFile makes the fake read its mode from the file "mode" in dirEnv.
const modeFile = "file"

// Eval IDs with a special meaning to the fake.
const (
	evalCrash = "crash" // the plugin exits in the middle of the call
	evalHold  = "hold"  // the call blocks until the test releases it
	// evalConfig: the answer is "config <json>", the config in force.
	evalConfig = "config"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(pluginEnv); mode != "" {
		if mode == modeFile {
			// The mode is the file's content now: a test changes what
			// the next launch serves.
			raw, err := os.ReadFile(filepath.Join(os.Getenv(dirEnv), "mode"))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			mode = strings.TrimSpace(string(raw))
		}
		serveFake(&fakeScheduler{mode: mode, dir: os.Getenv(dirEnv)}, os.Getenv(baseEnv))
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// fakeScheduler serves job types by mode and answers Schedule with its name
// and pid, so a test can tell which process served a call.
type fakeScheduler struct {
	mode string
	dir  string
}

func (f *fakeScheduler) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	jt := func(name string, attempts int32) *schedulerpb.JobTypeInfo {
		return &schedulerpb.JobTypeInfo{Name: name, MaxAttempts: attempts}
	}
	info := &schedulerpb.InfoResponse{Name: "fake-" + f.mode, Version: "1"}
	if v := configured.version(); v != "" {
		info.Version = v // a declaration made after the config arrived
	}
	switch f.mode {
	case "a":
		info.JobTypes = []*schedulerpb.JobTypeInfo{jt("fake", 3), jt("only-a", 2)}
	case "b":
		info.JobTypes = []*schedulerpb.JobTypeInfo{jt("fake", 5), jt("fake-b", 1)}
		info.JobTypes[1].PerNode = true
	case "empty":
	}
	return info, nil
}

func (f *fakeScheduler) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	switch req.GetEval().GetId() {
	case evalCrash:
		os.Exit(3)
	case evalHold:
		if err := f.hold(ctx); err != nil {
			return nil, err
		}
	case evalConfig:
		return &schedulerpb.ScheduleResponse{StatusDescription: "config " + configured.get()}, nil
	}
	return &schedulerpb.ScheduleResponse{StatusDescription: fmt.Sprintf("fake-%s %d", f.mode, os.Getpid())}, nil
}

// hold announces the call in dir/held-<pid> and waits for dir/release.
func (f *fakeScheduler) hold(ctx context.Context) error {
	if err := os.WriteFile(filepath.Join(f.dir, fmt.Sprintf("held-%d", os.Getpid())), nil, 0o600); err != nil {
		return err
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(f.dir, "release")); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// servedBy parses a fake's answer into plugin name and pid.
func servedBy(t *testing.T, resp *schedulerpb.ScheduleResponse) (string, int) {
	t.Helper()
	name, pid, ok := strings.Cut(resp.GetStatusDescription(), " ")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil {
		t.Fatalf("unexpected fake answer %q", resp.GetStatusDescription())
	}
	return name, n
}

func evalReq(id string) *schedulerpb.ScheduleRequest {
	return &schedulerpb.ScheduleRequest{Eval: &schedulerpb.Evaluation{Id: id, Type: "fake"}}
}

var errTimeout = errors.New("condition not met before the deadline")

// waitFor polls cond until it holds or 20 s pass.
func waitFor(cond func() bool) error {
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			return errTimeout
		case <-tick.C:
		}
	}
	return nil
}
