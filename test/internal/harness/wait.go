package harness

import (
	"net"
	"testing"
	"time"
)

// Deadlines are generous: the machine is small and shared, and a deadline
// only bounds a failure, never slows a pass.
const (
	// WaitTimeout bounds one condition wait of a test.
	WaitTimeout = 60 * time.Second
	// CLITimeout bounds one CLI run or HTTP request.
	CLITimeout = 2 * time.Minute
)

// WaitFor polls cond until it holds or timeout passes; cond's message says
// what it saw last, for the failure.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if last, ok := Poll(timeout, 150*time.Millisecond, cond); !ok {
		t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
	}
}

// Poll calls cond every interval until it holds (ok) or timeout passes; it
// returns cond's last message. Unlike WaitFor it fails nothing, so a
// goroutine other than the test's may use it.
func Poll(timeout, interval time.Duration, cond func() (bool, string)) (last string, ok bool) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return last, true
		}
		if time.Now().After(deadline) {
			return last, false
		}
		<-tick.C
	}
}

// FreePorts reserves n distinct free TCP ports on the loopback address.
// They are free when this returns, not reserved: another process can take
// one before the agent listens on it, so callers retry on a clash.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
