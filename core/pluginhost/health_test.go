package pluginhost

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// waitHealth waits (waitFor: a ticker, 20 s) until the plugin's health is
// want and returns its status.
func waitHealth(t *testing.T, h *Host, name, want string) PluginStatus {
	t.Helper()
	var st PluginStatus
	if err := waitFor(func() bool { st = statusOf(t, h, name); return st.Health == want }); err != nil {
		t.Fatalf("plugin %s health %q (%s), want %q: %v", name, st.Health, st.HealthDescription, want, err)
	}
	return st
}

// A stopped plugin (SIGSTOP) runs but answers nothing: its status says so
// with a reason within seconds, by the health probe when it is idle and by
// the age of an unanswered Schedule call when work waits on it; it is
// healthy again once it answers (SIGCONT), and nothing was restarted.
func TestStoppedPluginReportedUnhealthy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		probe      time.Duration
		unanswered time.Duration
		call       bool
		reason     string
		slow       string // full tier only, because
	}{
		// Not full tier, though it waits out two 2 s probe timeouts: the
		// case after it fails now and then (its Schedule call answered
		// although the plugin was sent SIGSTOP) when it runs first in the
		// test process, as it did under -short with this case skipped.
		{name: "idle, by the probe", probe: 50 * time.Millisecond, unanswered: time.Hour, reason: "did not answer its health check"},
		{name: "a Schedule call waits", probe: time.Hour, unanswered: 200 * time.Millisecond, call: true, reason: "a Schedule call has not been answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.slow != "" {
				testtier.Slow(t, tc.slow)
			}
			cfg := testConfig(t, fake("sched-b", "b"))
			cfg.ProbeInterval, cfg.UnansweredAfter = tc.probe, tc.unanswered
			h := newHost(t, cfg)
			st := waitHealth(t, h, "sched-b", structs.AgentPluginHealthy)
			pid := st.Pid
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			cont := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
			t.Cleanup(cont)
			// kill returns once the signal is queued: the process stops
			// when each of its threads next enters the kernel. A call sent
			// before that may still be answered.
			if err := waitFor(func() bool { return processStopped(pid) }); err != nil {
				t.Fatalf("plugin pid %d not stopped after SIGSTOP: %v", pid, err)
			}
			called := make(chan error, 1)
			if tc.call {
				sched, _, err := h.Schedulers().Lookup("fake-b")
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_, err := sched.Schedule(ctx, &schedulerpb.ScheduleRequest{Eval: &schedulerpb.Evaluation{Id: "e", Type: "fake-b"}})
					called <- err
				}()
			}
			if tc.call {
				// The call must still be waiting when the plugin is
				// reported unhealthy: one that came back was answered by
				// something other than the stopped process.
				if err := waitFor(func() bool {
					select {
					case err := <-called:
						t.Fatalf("the Schedule call to the stopped plugin returned: %v", err)
					default:
					}
					return statusOf(t, h, "sched-b").Health == structs.AgentPluginUnhealthy
				}); err != nil {
					t.Fatalf("plugin sched-b not reported unhealthy: %v", err)
				}
			}
			st = waitHealth(t, h, "sched-b", structs.AgentPluginUnhealthy)
			if !strings.Contains(st.HealthDescription, tc.reason) || !st.Running || st.Pid != pid {
				t.Fatalf("status %+v; want running pid %d, unhealthy because %q", st, pid, tc.reason)
			}
			cont()
			if tc.call {
				select {
				case <-called:
				case <-time.After(time.Minute):
					t.Fatal("the Schedule call did not return after SIGCONT")
				}
			}
			st = waitHealth(t, h, "sched-b", structs.AgentPluginHealthy)
			if st.Pid != pid || st.Restarts != 0 || st.HealthDescription != "" {
				t.Fatalf("status after SIGCONT %+v; want the same process, healthy, not restarted", st)
			}
		})
	}
}

// processStopped reports whether every thread of pid is stopped (state T
// in /proc/<pid>/task/*/stat).
func processStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the command's closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}
