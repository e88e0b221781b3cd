package harness

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// RetryTimeout bounds how long a client goes on sending one request again
// (RawRetry, DoRetry, the Must… helpers, MustCLI). It covers a leader
// election and a server's restart on a loaded machine; it only bounds a
// failure, never slows a pass.
const RetryTimeout = 90 * time.Second

// Retry pacing: a short first wait, doubled up to a ceiling, so a brief
// blip costs little and a long one does not flood the agent.
const (
	retryFirstWait = 50 * time.Millisecond
	retryMaxWait   = time.Second
)

// Retryable reports whether a client of the API should send the request
// again, as Nomad's clients do, rather than take the answer as final:
//   - 502, 503, 504: the agent says it cannot serve now (no cluster leader,
//     the leader unreachable, the agent shutting down) and nothing was done;
//   - connection refused: the request reached no agent (one restarting);
//   - for a GET, which changes nothing, also a connection that broke before
//     the answer (an agent that stopped mid-request).
//
// A write whose connection broke mid-way may have been applied, so it is
// not sent again; nor is any other answer (4xx, 500), which is the agent's
// verdict, nor the client's own timeout.
func Retryable(method string, status int, err error) bool {
	if err == nil {
		switch status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// refused reports whether err is a refused connection.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// retryLoop runs attempt until it says stop, a.Alive says the agent's
// process is gone (a refused connection will stay refused), or the retry
// deadline passes. It returns how many attempts were made.
func (a *API) retryLoop(attempt func(n int) (again, wasRefused bool)) int {
	timeout := a.RetryTimeout
	if timeout <= 0 {
		timeout = RetryTimeout
	}
	deadline := time.Now().Add(timeout)
	wait := retryFirstWait
	for n := 1; ; n++ {
		again, wasRefused := attempt(n)
		if !again || (wasRefused && a.Alive != nil && !a.Alive()) || time.Now().Add(wait).After(deadline) {
			return n
		}
		// Pacing between attempts, not a wait on a condition: the next
		// attempt is what checks whether the agent can serve again.
		t := time.NewTimer(wait)
		<-t.C
		wait = min(2*wait, retryMaxWait)
	}
}

// RawRetry is Raw as a client that retries does it: the request is sent
// again while Retryable says so, up to RetryTimeout. It returns the last
// answer, whatever it is; an error says how many attempts were made.
func (a *API) RawRetry(method, path string, in any) (int, []byte, error) {
	status, body, _, err := a.rawRetry(method, path, in)
	return status, body, err
}

// rawRetry is RawRetry that also says what the attempts before the last
// answered ("" when there was one attempt), for the test's log.
func (a *API) rawRetry(method, path string, in any) (status int, body []byte, retried string, err error) {
	var seen []string
	n := a.retryLoop(func(int) (bool, bool) {
		status, body, err = a.Raw(method, path, in)
		again := Retryable(method, status, err)
		if again {
			if err != nil {
				seen = append(seen, err.Error())
			} else {
				seen = append(seen, fmt.Sprintf("%d %s", status, strings.TrimSpace(string(body))))
			}
		}
		return again, refused(err)
	})
	if n > 1 && err != nil {
		err = fmt.Errorf("after %d attempts: %w", n, err)
	}
	if n > 1 {
		retried = fmt.Sprintf("%s %s on %s: %d attempts; retried after %s", method, path, a.Addr, n, summarize(seen))
	}
	return status, body, retried, err
}

// summarize shortens a list of answers to its distinct ones, counted.
func summarize(answers []string) string {
	count := map[string]int{}
	var order []string
	for _, s := range answers {
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	parts := make([]string, 0, len(order))
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%dx %q", count[s], s))
	}
	return strings.Join(parts, ", ")
}

// DoRetry is Do over RawRetry.
func (a *API) DoRetry(method, path string, in, out any) (int, error) {
	status, body, err := a.RawRetry(method, path, in)
	return decode(method, path, status, body, err, out)
}

// transientCLI reports whether a failed CLI run failed for a reason a user
// would simply run it again for: the CLI prints the agent's status code
// (see Retryable) or the refused connection in its error.
func transientCLI(res CLIResult) (again, wasRefused bool) {
	if res.Code == 0 {
		return false, false
	}
	for _, code := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		if strings.Contains(res.Stderr, fmt.Sprintf("Unexpected response code: %d ", code)) {
			return true, false
		}
	}
	if strings.Contains(res.Stderr, "connection refused") {
		return true, true
	}
	return false, false
}
