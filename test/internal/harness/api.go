package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The API's JSON, reduced to what the tests read. Declared here rather than
// imported from core/structs so that the tests pin the wire format (Nomad's
// PascalCase keys) a user's tooling depends on.
type (
	// JobStub is one row of GET /v1/jobs.
	JobStub struct {
		ID, ParentID, Type, Status string
		Periodic, ParameterizedJob bool
		Stop                       bool
		ModifyIndex                uint64
	}
	// Job is GET /v1/job/:id.
	Job struct {
		ID, ParentID, Type, Status string
		Stop                       bool
		Meta                       map[string]string
		Payload                    []byte
		DispatchIdempotencyToken   string
	}
	// TaskState is one task's state in an allocation.
	TaskState struct {
		State    string
		Failed   bool
		Restarts uint64
	}
	// Alloc is an allocation (or its stub in a list).
	Alloc struct {
		ID, EvalID, Name, JobID, NodeID, TaskGroup string
		DesiredStatus, ClientStatus                string
		TaskStates                                 map[string]*TaskState
	}
	// Evaluation is GET /v1/evaluation/:id.
	Evaluation struct {
		ID, JobID, Status, StatusDescription, TriggeredBy string
	}
	// NodeStub is one row of GET /v1/nodes.
	NodeStub struct {
		ID, Name, Status, SchedulingEligibility string
		Drain                                   bool
		Drivers                                 map[string]struct{ Detected, Healthy bool }
	}
	// Node is GET /v1/node/:id.
	Node struct {
		ID, Name, Status, SchedulingEligibility string
		DrainStrategy                           json.RawMessage
	}
	// RegisterResponse is the answer to PUT /v1/jobs.
	RegisterResponse struct {
		EvalID   string
		Warnings string
	}
	// DispatchResponse is the answer to PUT /v1/job/:id/dispatch.
	DispatchResponse struct {
		DispatchedJobID string
		EvalID          string
	}
)

// API is one agent's HTTP API and CLI, bound to the test that uses it: the
// Must… helpers fail that test. The others only return errors, so any
// goroutine may use them.
//
// Raw and Do send a request once: they observe (is there a leader now?).
// RawRetry, DoRetry, the Must… helpers and MustCLI act as a client does:
// they send a request again while the agent cannot serve it yet (see
// Retryable), so a brief leader loss or a restarting agent does not fail a
// test that only needs the request done.
type API struct {
	T    testing.TB
	Addr string // host:port of the HTTP API
	Bin  string // the drover binary the CLI runs
	Dir  string // the CLI's working directory
	HTTP *http.Client
	// RetryTimeout bounds the retries of one request (RetryTimeout when 0).
	RetryTimeout time.Duration
	// Alive, when set, says whether the agent's process still runs: a
	// refused connection to one that does not is final, not retried.
	Alive func() bool
	// Token, when set, is the ACL secret every request and CLI run
	// carries (X-Nomad-Token, DROVER_TOKEN).
	Token string
}

// NewAPI returns the API of the agent at addr.
func NewAPI(t testing.TB, addr, bin, dir string) *API {
	return &API{T: t, Addr: addr, Bin: bin, Dir: dir, HTTP: &http.Client{Transport: &http.Transport{}, Timeout: CLITimeout}}
}

// Do sends one API request; in (when not nil) is sent as JSON and a 2xx body
// is decoded into out (when not nil). The status is returned whatever it is.
func (a *API) Do(method, path string, in, out any) (int, error) {
	status, body, err := a.Raw(method, path, in)
	return decode(method, path, status, body, err, out)
}

// decode decodes a 2xx body into out (when not nil).
func decode(method, path string, status int, body []byte, err error, out any) (int, error) {
	if err != nil || status/100 != 2 || out == nil {
		return status, err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return status, fmt.Errorf("decode %s %s: %w\n%s", method, path, err, body)
	}
	return status, nil
}

// Raw sends one API request and returns the status and body as they came.
func (a *API) Raw(method, path string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+a.Addr+path, body)
	if err != nil {
		return 0, nil, err
	}
	if a.Token != "" {
		req.Header.Set("X-Nomad-Token", a.Token)
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// MustGet reads path into out and fails the test unless the answer is 200,
// once retries (see Retryable) are over.
func (a *API) MustGet(path string, out any) {
	a.T.Helper()
	status, body, retried, err := a.rawRetry(http.MethodGet, path, nil)
	if retried != "" {
		a.T.Log(retried)
	}
	if status, err = decode(http.MethodGet, path, status, body, err, out); err != nil || status != http.StatusOK {
		a.T.Fatalf("GET %s on %s: status %d, %v", path, a.Addr, status, err)
	}
}

// MustWrite sends in with method and fails the test unless the answer is
// 2xx, once retries (see Retryable) are over.
func (a *API) MustWrite(method, path string, in, out any) {
	a.T.Helper()
	status, body, retried, err := a.rawRetry(method, path, in)
	if retried != "" {
		a.T.Log(retried)
	}
	if err != nil || status/100 != 2 {
		a.T.Fatalf("%s %s on %s: status %d, %v: %s", method, path, a.Addr, status, err, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			a.T.Fatalf("%s %s: decode: %v\n%s", method, path, err, body)
		}
	}
}

// ParseJob turns HCL into the API's job JSON through POST /v1/jobs/parse.
func (a *API) ParseJob(hcl string) json.RawMessage {
	a.T.Helper()
	var out json.RawMessage
	a.MustWrite(http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": hcl, "Canonicalize": true}, &out)
	return out
}

// AllocsOf lists a job's allocations.
func (a *API) AllocsOf(jobID string) []Alloc {
	a.T.Helper()
	var out []Alloc
	a.MustGet("/v1/job/"+Escape(jobID)+"/allocations", &out)
	return out
}

// Escape escapes a job ID for a path: child IDs hold a slash.
func Escape(id string) string { return strings.ReplaceAll(id, "/", "%2F") }

// CLIResult is what one CLI run printed and returned.
type CLIResult struct {
	Stdout, Stderr string
	Code           int
}

func (r CLIResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout ---\n%s--- stderr ---\n%s", r.Code, r.Stdout, r.Stderr)
}

// CLI runs `drover <args>` against the agent (DROVER_ADDR) and returns its
// output and exit code. Only a CLI that cannot run or hangs fails the test.
func (a *API) CLI(args ...string) CLIResult {
	a.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.Bin, args...)
	cmd.Env = append(os.Environ(), "DROVER_ADDR=http://"+a.Addr)
	if a.Token != "" {
		cmd.Env = append(cmd.Env, "DROVER_TOKEN="+a.Token)
	}
	cmd.Dir = a.Dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := CLIResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		a.T.Fatalf("drover %s: no exit within %s\n%s", strings.Join(args, " "), CLITimeout, res)
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		a.T.Fatalf("drover %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// MustCLI is CLI for a run that must exit 0. A run that failed because
// the agent could not serve it yet (a 502/503/504 or a refused connection,
// see Retryable) is run again, as a user would, up to RetryTimeout.
func (a *API) MustCLI(args ...string) CLIResult {
	a.T.Helper()
	var res CLIResult
	n := a.retryLoop(func(int) (bool, bool) {
		res = a.CLI(args...)
		return transientCLI(res)
	})
	if n > 1 {
		a.T.Logf("drover %s (against %s): %d runs, the others failed on a transient error", strings.Join(args, " "), a.Addr, n)
	}
	if res.Code != 0 {
		a.T.Fatalf("drover %s (against %s): %s", strings.Join(args, " "), a.Addr, res)
	}
	return res
}
