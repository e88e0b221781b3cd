package pluginhost

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/core/internal/proctest"
)

// A plugin process that stops answering (SIGSTOP) holds a call only until
// the caller's deadline, which the host reports as the caller's own
// deadline, not as the plugin dying: the instance is kept, and once the
// process runs again the same handle serves calls.
func TestStoppedPluginCallEndsAtCallerDeadline(t *testing.T) {
	h := newHost(t, testConfig(t, fake("sched-a", "a")))
	s, _, err := h.Schedulers().Lookup("fake")
	if err != nil {
		t.Fatal(err)
	}
	pid := statusOf(t, h, "sched-a").Pid
	proctest.Stop(t, pid)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Schedule(ctx, evalReq("stopped"))
	if err == nil || errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("call to a stopped plugin: err = %v, want the caller's deadline, not ErrPluginUnavailable", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("call to a stopped plugin took %s; the deadline was 300ms", d)
	}
	if st := statusOf(t, h, "sched-a"); !st.Running || st.Pid != pid || st.Restarts != 0 {
		t.Fatalf("after a timed-out call Status = %+v; want the same instance, running", st)
	}

	resume()
	if err := waitFor(func() bool {
		_, err := s.Schedule(t.Context(), evalReq("resumed"))
		return err == nil
	}); err != nil {
		t.Fatal("no call succeeded after SIGCONT:", err)
	}
}
