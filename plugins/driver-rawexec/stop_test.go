package rawexec

import (
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestStopTask(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		args       []string
		killSignal string // TaskConfig.kill_signal
		signal     string // StopTask's signal
		timeout    time.Duration
		// ready, if set, is printed by the task once its traps are set.
		ready      string
		wantCode   int32
		wantSignal int32
		// wantKilled: the task must have outlived the timeout.
		wantKilled bool
	}{{
		name:       "well-behaved task stops on SIGTERM",
		command:    "sleep",
		args:       []string{"60"},
		timeout:    testTimeout,
		wantCode:   143,
		wantSignal: 15,
	}, {
		name:       "the whole process group gets the signal",
		command:    "/bin/sh",
		args:       []string{"-c", "sleep 60; echo unreachable"},
		timeout:    testTimeout,
		wantCode:   143,
		wantSignal: 15,
	}, {
		name:    "task ignoring SIGTERM is killed after the timeout",
		command: "/bin/sh",
		// sleep inherits the ignored TERM, so nothing in the group dies
		// before the SIGKILL.
		args:       []string{"-c", "trap '' TERM; echo ready; sleep 60"},
		ready:      "ready",
		timeout:    200 * time.Millisecond,
		wantCode:   137,
		wantSignal: 9,
		wantKilled: true,
	}, {
		name:       "zero timeout kills at once",
		command:    "/bin/sh",
		args:       []string{"-c", "trap '' TERM; echo ready; sleep 60"},
		ready:      "ready",
		wantCode:   137,
		wantSignal: 9,
	}, {
		name:       "task kill_signal is the default",
		command:    "sleep",
		args:       []string{"60"},
		killSignal: "SIGINT",
		timeout:    testTimeout,
		wantCode:   130,
		wantSignal: 2,
	}, {
		name:       "request signal overrides kill_signal",
		command:    "sleep",
		args:       []string{"60"},
		killSignal: "SIGINT",
		signal:     "SIGUSR1",
		timeout:    testTimeout,
		wantCode:   138,
		wantSignal: 10,
	}, {
		name:       "a trapped signal lets the task exit its own way",
		command:    "/bin/sh",
		args:       []string{"-c", "trap 'echo bye; exit 7' TERM; echo ready; while :; do sleep 0.05; done"},
		ready:      "ready",
		timeout:    testTimeout,
		wantCode:   7,
		wantSignal: 0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDriver()
			cfg := newTaskConfig(t, "alloc-1/stop", tt.command, tt.args...)
			cfg.KillSignal = tt.killSignal
			start(t, d, cfg)
			if tt.ready != "" {
				waitForOutput(t, cfg.GetStdoutPath(), tt.ready)
			}
			began := time.Now()
			if err := d.StopTask(testCtx(t), cfg.GetId(), tt.timeout, tt.signal); err != nil {
				t.Fatalf("StopTask: %v", err)
			}
			took := time.Since(began)
			// StopTask returns only once the task has exited.
			st, err := d.InspectTask(testCtx(t), cfg.GetId())
			if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_EXITED {
				t.Fatalf("after StopTask: %v, %v", st, err)
			}
			res := awaitExit(t, d, cfg.GetId())
			if res.GetExitCode() != tt.wantCode || res.GetSignal() != tt.wantSignal {
				t.Fatalf("exit = %v, want code %d signal %d", res, tt.wantCode, tt.wantSignal)
			}
			if tt.wantKilled && took < tt.timeout {
				t.Fatalf("killed after %v, before the %v timeout", took, tt.timeout)
			}
		})
	}
}

func TestStopTaskRefusesUnknownSignal(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/stop-bad-signal", "sleep", "60")
	start(t, d, cfg)
	if err := d.StopTask(testCtx(t), cfg.GetId(), time.Second, "SIGWHAT"); err == nil {
		t.Fatal("StopTask with an unknown signal succeeded")
	}
	st, err := d.InspectTask(testCtx(t), cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("task after refused stop: %v, %v", st, err)
	}
}
