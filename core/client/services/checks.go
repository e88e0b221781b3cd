package services

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/drover-org/drover/core/client/taskenv"
	"github.com/drover-org/drover/core/structs"
)

// Service checks of native (provider "nomad") services, run by the client
// on the allocation's node as Nomad does: http (2xx passing, 429 warning,
// anything else critical), tcp (a connection passes) and script (exit 0
// passing, 1 warning, anything else critical), each at its interval with
// its timeout. A check's status is what the registration carries; a new
// status (not a new output) re-registers the service, so a steady cluster
// writes nothing.

// A check's result as Consul names it, before it is reported.
type checkHealth int

const (
	checkPending checkHealth = iota
	checkPassing
	checkWarning
	checkCritical
)

// CheckWarning is the reported status of a check whose result was a
// warning (HTTP 429, script exit 1); Nomad's own checks know only success
// and failure.
const CheckWarning = "warning"

// reported is the CheckStatus.Status of h.
func (h checkHealth) reported() string {
	switch h {
	case checkPassing:
		return structs.CheckSuccess
	case checkWarning:
		return CheckWarning
	case checkCritical:
		return structs.CheckFailure
	}
	return structs.CheckPending
}

// healthFromReported reads a reported status back.
func healthFromReported(s string) checkHealth {
	switch s {
	case structs.CheckSuccess:
		return checkPassing
	case CheckWarning:
		return checkWarning
	case structs.CheckFailure:
		return checkCritical
	}
	return checkPending
}

// initialHealth is a check's initial_status ("passing", "warning",
// "critical"; empty: pending until the first result).
func initialHealth(s string) checkHealth {
	switch s {
	case "passing":
		return checkPassing
	case "warning":
		return checkWarning
	case "critical":
		return checkCritical
	}
	return checkPending
}

// httpHealth maps an http check's status code.
func httpHealth(code int) checkHealth {
	switch {
	case code >= 200 && code < 300:
		return checkPassing
	case code == http.StatusTooManyRequests:
		return checkWarning
	}
	return checkCritical
}

// scriptHealth maps a script check's exit code.
func scriptHealth(code int) checkHealth {
	switch code {
	case 0:
		return checkPassing
	case 1:
		return checkWarning
	}
	return checkCritical
}

// Defaults of a check without interval or timeout (the jobspec requires
// both for Nomad; these only guard against zero values).
const (
	defaultCheckInterval = 10 * time.Second
	defaultCheckTimeout  = 2 * time.Second
)

// checkID is a check's stable ID within its alloc's service.
func checkID(allocID, group, task, service string, index int, name string) string {
	h := sha256.Sum256([]byte(strings.Join([]string{allocID, group, task, service, fmt.Sprint(index), name}, "\x00")))
	return hex.EncodeToString(h[:16])
}

// checkSpec is one check of one service of an alloc, ready to run.
type checkSpec struct {
	id      string
	regID   string
	group   string
	task    string // the task a task service belongs to; empty for a group service
	service string // the service's (interpolated) name
	mode    string
	check   *structs.ServiceCheck
	// addr is host:port for http and tcp checks.
	addr string
	// execIn is the task a script check runs in (nil: none found).
	execIn Task
	// restartTask is the task check_restart restarts (nil: none).
	restartTask Task
	// ignoreWarnings: on_update "ignore_warnings" counts a warning as
	// passing for the alloc's health.
	ignoreWarnings bool
}

// checkOutcome is one run's result.
type checkOutcome struct {
	health checkHealth
	code   int
	output string
}

// runCheck runs one check once, bounded by its timeout.
func runCheck(ctx context.Context, c *checkSpec) checkOutcome {
	timeout := c.check.Timeout
	if timeout <= 0 {
		timeout = defaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out checkOutcome
	switch c.check.Type {
	case structs.ServiceCheckHTTP:
		out = runHTTPCheck(ctx, c)
	case structs.ServiceCheckTCP:
		out = runTCPCheck(ctx, c)
	case structs.ServiceCheckScript:
		out = runScriptCheck(ctx, c)
	default:
		out = checkOutcome{health: checkCritical, output: fmt.Sprintf("check type %q is not supported", c.check.Type)}
	}
	out.output = truncateOutput(out.output)
	return out
}

// truncateOutput bounds a check's output to MaxCheckOutputBytes, on a
// UTF-8 boundary.
func truncateOutput(s string) string {
	if len(s) <= structs.MaxCheckOutputBytes {
		return s
	}
	cut := structs.MaxCheckOutputBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

func runHTTPCheck(ctx context.Context, c *checkSpec) checkOutcome {
	ck := c.check
	if c.addr == "" {
		return checkOutcome{health: checkCritical, output: "http check: the service has no address and port"}
	}
	scheme := ck.Protocol
	if scheme == "" {
		scheme = "http"
	}
	path := ck.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	method := ck.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if ck.Body != "" {
		body = strings.NewReader(ck.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+"://"+c.addr+path, body)
	if err != nil {
		return checkOutcome{health: checkCritical, output: fmt.Sprintf("http check: %v", err)}
	}
	for k, vs := range ck.Header {
		for _, v := range vs {
			if strings.EqualFold(k, "Host") {
				req.Host = v
				continue
			}
			req.Header.Add(k, v)
		}
	}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: ck.TLSSkipVerify, ServerName: ck.TLSServerName}, //nolint:gosec // the job's tls_skip_verify
		DisableKeepAlives: true,
		Proxy:             nil,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return checkOutcome{health: checkCritical, output: fmt.Sprintf("http check: %v", err)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, structs.MaxCheckOutputBytes+1))
	return checkOutcome{health: httpHealth(resp.StatusCode), code: resp.StatusCode,
		output: fmt.Sprintf("HTTP %s %s: %s Output: %s", method, req.URL, resp.Status, b)}
}

func runTCPCheck(ctx context.Context, c *checkSpec) checkOutcome {
	if c.addr == "" {
		return checkOutcome{health: checkCritical, output: "tcp check: the service has no address and port"}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return checkOutcome{health: checkCritical, output: fmt.Sprintf("tcp check: %v", err)}
	}
	_ = conn.Close()
	return checkOutcome{health: checkPassing, output: fmt.Sprintf("TCP connect %s: Success", c.addr)}
}

// rawExecDriver is the driver whose tasks are plain child processes of
// the client's node: a script check runs beside them, as a child of the
// client, with the task's environment and directory.
const rawExecDriver = "raw_exec"

func runScriptCheck(ctx context.Context, c *checkSpec) checkOutcome {
	tr := c.execIn
	if tr == nil {
		return checkOutcome{health: checkCritical, output: "script check: no task to run it in"}
	}
	if task := tr.Spec(); task.Driver != rawExecDriver {
		return checkOutcome{health: checkCritical, output: fmt.Sprintf("script check: task %q's driver %q cannot run commands in the task", task.Name, task.Driver)}
	}
	env, dir := tr.ExecContext()
	if env == nil {
		return checkOutcome{health: checkCritical, output: "script check: the task is not set up yet"}
	}
	lookup := (&taskenv.Env{Env: env}).Lookup
	args := make([]string, len(c.check.Args))
	for i, a := range c.check.Args {
		args[i] = taskenv.Interpolate(a, lookup)
	}
	cmd := exec.CommandContext(ctx, taskenv.Interpolate(c.check.Command, lookup), args...)
	cmd.Dir = dir
	cmd.Env = taskenv.List(env)
	// The command and whatever it starts die with the timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	out := &boundedBuffer{limit: structs.MaxCheckOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if ctx.Err() != nil {
		return checkOutcome{health: checkCritical, output: fmt.Sprintf("script check timed out after %s: %s", c.check.Timeout, out.String())}
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return checkOutcome{health: checkPassing, output: out.String()}
	case errors.As(err, &ee) && ee.Exited():
		return checkOutcome{health: scriptHealth(ee.ExitCode()), code: ee.ExitCode(), output: out.String()}
	}
	return checkOutcome{health: checkCritical, output: fmt.Sprintf("script check: %v %s", err, out.String())}
}

// boundedBuffer keeps the first limit bytes written to it.
type boundedBuffer struct {
	buf   bytes.Buffer
	limit int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string { return b.buf.String() }

// checkState is the client's view of one check: its current health, the
// consecutive results toward a flip, and the status last reported.
type checkState struct {
	spec      *checkSpec
	health    checkHealth
	successes int
	failures  int
	// since is when health last changed.
	since time.Time
	// reported is the CheckStatus the registration carries; replaced
	// only when health changes.
	reported *structs.CheckStatus
	// latest is the newest result, output and all.
	latest *structs.CheckStatus
	// restartFails counts consecutive failures toward check_restart's
	// limit.
	restartFails int
}

// wantsRestart counts o toward the check's check_restart and reports
// whether the limit is reached (the count then starts over). Results in
// the grace after the task's latest start do not count.
func (s *checkState) wantsRestart(o checkOutcome, taskStart, now time.Time) bool {
	cr := s.spec.check.CheckRestart
	if cr == nil || cr.Limit <= 0 {
		return false
	}
	if taskStart.IsZero() || now.Before(taskStart.Add(cr.Grace)) {
		s.restartFails = 0
		return false
	}
	failing := o.health == checkCritical || o.health == checkWarning && !cr.IgnoreWarnings
	if !failing {
		s.restartFails = 0
		return false
	}
	s.restartFails++
	if s.restartFails < cr.Limit {
		return false
	}
	s.restartFails = 0
	return true
}

// observe applies one run's outcome (success_before_passing and
// failures_before_critical/warning counting consecutive results) and
// reports whether health changed.
func (s *checkState) observe(o checkOutcome, now time.Time) bool {
	ck := s.spec.check
	next := s.health
	switch o.health {
	case checkPassing:
		s.successes++
		s.failures = 0
		if s.successes >= max(ck.SuccessBeforePassing, 1) {
			next = checkPassing
		}
	case checkWarning, checkCritical:
		s.failures++
		s.successes = 0
		need := ck.FailuresBeforeCritical
		if o.health == checkWarning {
			need = ck.FailuresBeforeWarning
		}
		// A check not yet passing takes its first failure at once.
		if s.failures >= max(need, 1) || s.health == checkPending {
			next = o.health
		}
	}
	s.latest = s.status(o.health, o.code, o.output, now)
	if next == s.health && s.reported != nil {
		return false
	}
	changed := next != s.health
	s.health = next
	if changed {
		s.since = now
	}
	s.reported = s.status(next, o.code, o.output, now)
	return changed
}

func (s *checkState) status(h checkHealth, code int, output string, now time.Time) *structs.CheckStatus {
	sp := s.spec
	return &structs.CheckStatus{
		ID: sp.id, Check: sp.check.Name, Group: sp.group, Task: sp.task, Service: sp.service, Mode: sp.mode,
		Status: h.reported(), StatusCode: code, Output: output, Timestamp: now.Unix(),
	}
}
