package pluginhost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// Reload must let a call in flight on the old instance finish before it
// kills that instance.
func TestReloadDrainsCallsInFlight(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, testConfig(t, fake("sched-a", "a", dirEnv+"="+dir)))
	s, _, err := h.Schedulers().Lookup("fake")
	if err != nil {
		t.Fatal(err)
	}
	oldPid := statusOf(t, h, "sched-a").Pid

	type result struct {
		pid int
		err error
	}
	held := make(chan result, 1)
	go func() {
		resp, err := s.Schedule(t.Context(), evalReq(evalHold))
		if err != nil {
			held <- result{err: err}
			return
		}
		_, pid := servedBy(t, resp)
		held <- result{pid: pid}
	}()
	if err := waitFor(func() bool {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("held-%d", oldPid)))
		return err == nil
	}); err != nil {
		t.Fatal("the held call never reached the plugin:", err)
	}

	reloaded := make(chan error, 1)
	go func() { reloaded <- h.Reload(t.Context()) }()
	// Once the new instance is current, Reload is draining the old one.
	if err := waitFor(func() bool { return statusOf(t, h, "sched-a").Pid != oldPid }); err != nil {
		t.Fatal("Reload never switched to a new instance:", err)
	}
	if !alive(oldPid) {
		t.Fatal("the old instance was killed with a call in flight")
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := <-held; r.err != nil || r.pid != oldPid {
		t.Fatalf("held call = pid %d, %v; want success from the old pid %d", r.pid, r.err, oldPid)
	}
	if err := <-reloaded; err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if alive(oldPid) {
		t.Errorf("old pid %d alive after Reload returned", oldPid)
	}
}

// Reload picks up a new binary, routes follow its Info, and a binary that
// fails to launch leaves the running instance in place.
func TestReloadNewBinary(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	install := func(body string) {
		t.Helper()
		// Write and rename, as a package manager does, so a launch never
		// sees a half-written file.
		tmp := filepath.Join(dir, ".next")
		if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "ext")); err != nil {
			t.Fatal(err)
		}
	}
	runs := func(mode string) string {
		return fmt.Sprintf("GORACE=atexit_sleep_ms=0 %s=%s exec %q", pluginEnv, mode, exe)
	}
	install(runs("b"))
	cfg := testConfig(t)
	cfg.PluginDir, cfg.Stanzas = dir, []Stanza{{Name: "ext"}}
	h := newHost(t, cfg)
	set := h.Schedulers()
	if got := set.ServedTypes(); !slices.Equal(got, []string{"fake", "fake-b"}) {
		t.Fatalf("ServedTypes = %v", got)
	}

	install(runs("a"))
	if err := h.Reload(t.Context()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := set.ServedTypes(); !slices.Equal(got, []string{"fake", "only-a"}) {
		t.Errorf("after Reload ServedTypes = %v, want the new binary's types", got)
	}
	var unknown *UnknownJobTypeError
	if _, _, err := set.Lookup("fake-b"); !errors.As(err, &unknown) {
		t.Errorf("Lookup(fake-b) after Reload: err = %v, want UnknownJobTypeError", err)
	}

	running := statusOf(t, h, "ext").Pid
	install("exit 1")
	if err := h.Reload(t.Context()); err == nil {
		t.Fatal("Reload with a broken binary succeeded")
	}
	if st := statusOf(t, h, "ext"); st.Pid != running || !st.Running {
		t.Errorf("after a failed Reload Status = %+v, want still pid %d", st, running)
	}
	s, _, err := set.Lookup("only-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Schedule(t.Context(), evalReq("still-there")); err != nil {
		t.Errorf("call after a failed Reload: %v", err)
	}
}

func TestCloseLeavesNothingRunning(t *testing.T) {
	h, err := New(t.Context(), testConfig(t, fake("sched-a", "a"), fake("sched-b", "b")))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, st := range h.Status() {
		pids = append(pids, st.Pid)
	}
	s, _, err := h.Schedulers().Lookup("fake")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d alive after Close", pid)
		}
	}
	if _, err := s.Schedule(t.Context(), evalReq("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: err = %v, want ErrClosed", err)
	}
	if err := h.Reload(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Reload after Close: err = %v, want ErrClosed", err)
	}
	goleak.VerifyNone(t)
}
