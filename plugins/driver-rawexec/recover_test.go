package rawexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// gatedTask is a task that runs until the test opens its gate, then exits
// with code 42: recovery tests control exactly when the task ends.
func gatedTask(t *testing.T, id string) (cfg *driverpb.TaskConfig, gate string) {
	t.Helper()
	cfg = newTaskConfig(t, id, "/bin/sh", "-c", "read x < gate; echo released; exit 42")
	return cfg, mkfifo(t, cfg.GetTaskDir(), "gate")
}

// TestRecoverTask simulates the plugin process dying by dropping the driver
// that started a task and recovering it in a fresh Driver, which shares
// nothing with the first but the handle.
func TestRecoverTask(t *testing.T) {
	tests := []struct {
		name string
		// beforeRecover runs between start (on the first driver) and
		// RecoverTask on the second.
		beforeRecover func(t *testing.T, first *Driver, h *driverpb.TaskHandle, gate string)
		wantRunning   bool
		wantCode      int32
		wantErrSubstr string // in the exit result's err
	}{{
		name:          "running task keeps running and reports its real exit",
		beforeRecover: func(*testing.T, *Driver, *driverpb.TaskHandle, string) {},
		wantRunning:   true,
		wantCode:      42,
	}, {
		name: "task that exited while no driver watched",
		beforeRecover: func(t *testing.T, first *Driver, h *driverpb.TaskHandle, gate string) {
			openGate(t, gate)
			awaitExit(t, first, h.GetId())
		},
		wantCode: 42,
	}, {
		name: "task whose shim died keeps running, its exit status is lost",
		beforeRecover: func(t *testing.T, first *Driver, h *driverpb.TaskHandle, _ string) {
			st, err := decodeState(h.GetState())
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(st.ShimPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the shim to die", func() bool { return !procAlive(st.ShimPID, st.ShimStartTicks) })
		},
		wantRunning:   true,
		wantCode:      -1,
		wantErrSubstr: "exit status lost",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			first := newTestDriver()
			cfg, gate := gatedTask(t, "alloc-1/recover")
			h := start(t, first, cfg)
			tt.beforeRecover(t, first, h, gate)

			second := newTestDriver()
			if err := second.RecoverTask(ctx, h); err != nil {
				t.Fatalf("RecoverTask: %v", err)
			}
			t.Cleanup(func() { _ = second.DestroyTask(context.Background(), h.GetId(), true) })
			if err := second.RecoverTask(ctx, h); err != nil {
				t.Fatalf("second RecoverTask of a tracked task: %v", err)
			}
			st, err := second.InspectTask(ctx, h.GetId())
			if err != nil {
				t.Fatal(err)
			}
			if running := st.GetState() == driverpb.TaskState_TASK_STATE_RUNNING; running != tt.wantRunning {
				t.Fatalf("recovered state %v, want running=%v", st.GetState(), tt.wantRunning)
			}
			if st.GetPid() != h.GetPid() || st.GetStartedAtUnixNano() != h.GetStartedAtUnixNano() {
				t.Fatalf("recovered status %v does not match handle %v", st, h)
			}
			if tt.wantRunning {
				openGate(t, gate)
			}
			res := awaitExit(t, second, h.GetId())
			if res.GetExitCode() != tt.wantCode || !strings.Contains(res.GetErr(), tt.wantErrSubstr) ||
				(tt.wantErrSubstr == "" && res.GetErr() != "") {
				t.Fatalf("exit = %v, want code %d err containing %q", res, tt.wantCode, tt.wantErrSubstr)
			}
			if got := readFile(t, cfg.GetStdoutPath()); got != "released\n" {
				t.Fatalf("stdout = %q", got)
			}
		})
	}
}

func TestRecoveredTaskCanBeStopped(t *testing.T) {
	ctx := testCtx(t)
	first := newTestDriver()
	cfg, _ := gatedTask(t, "alloc-1/recover-stop")
	h := start(t, first, cfg)
	second := newTestDriver()
	if err := second.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := second.StopTask(ctx, h.GetId(), testTimeout, ""); err != nil {
		t.Fatal(err)
	}
	if res := awaitExit(t, second, h.GetId()); res.GetSignal() != 15 || res.GetExitCode() != 143 {
		t.Fatalf("exit = %v, want SIGTERM", res)
	}
	// The driver that started it sees the same end.
	if res := awaitExit(t, first, h.GetId()); res.GetSignal() != 15 {
		t.Fatalf("first driver's exit = %v", res)
	}
	if err := second.DestroyTask(ctx, h.GetId(), false); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverTaskRefusals(t *testing.T) {
	ctx := testCtx(t)
	d := newTestDriver()
	cfg, gate := gatedTask(t, "alloc-1/gone")
	h := start(t, d, cfg)
	openGate(t, gate)
	awaitExit(t, d, h.GetId())
	// A task that exited and whose result is gone with its task dir.
	if err := os.Remove(filepath.Join(cfg.GetTaskDir(), exitFileName)); err != nil {
		t.Fatal(err)
	}
	withState := func(state string) *driverpb.TaskHandle {
		return &driverpb.TaskHandle{Id: "alloc-1/bad", Pid: 1, State: []byte(state)}
	}
	tests := []struct {
		name    string
		handle  *driverpb.TaskHandle
		wantErr error
	}{
		{"nil handle", nil, driver.ErrInvalidConfig},
		{"no id", &driverpb.TaskHandle{State: h.GetState()}, driver.ErrInvalidConfig},
		{"not json", withState("not json"), driver.ErrInvalidConfig},
		{"other version", withState(`{"version":99,"shim_pid":1,"task_pid":1,"exit_file":"/x"}`), driver.ErrInvalidConfig},
		{"no pids", withState(`{"version":1,"exit_file":"/x"}`), driver.ErrInvalidConfig},
		{"task gone without a result", h, driver.ErrTaskNotFound},
		{"other boot", withState(`{"version":1,"shim_pid":1,"task_pid":1,"exit_file":"/nonexistent/x","boot_id":"other"}`),
			driver.ErrTaskNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := newTestDriver()
			err := fresh.RecoverTask(ctx, tt.handle)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("RecoverTask = %v, want %v", err, tt.wantErr)
			}
			if tt.handle != nil && tt.handle.GetId() != "" {
				if _, err := fresh.InspectTask(ctx, tt.handle.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
					t.Fatalf("refused handle is tracked: %v", err)
				}
			}
		})
	}
}
