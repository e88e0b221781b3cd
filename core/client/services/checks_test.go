package services

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// fakeTask is a task as the services see it.
type fakeTask struct {
	spec  *structs.Task
	state string
	start time.Time
	env   map[string]string
	dir   string
}

func (t *fakeTask) Spec() *structs.Task                      { return t.spec }
func (t *fakeTask) State() string                            { return t.state }
func (t *fakeTask) LastStart() time.Time                     { return t.start }
func (t *fakeTask) RestartForCheck(context.Context, string)  {}
func (t *fakeTask) ExecContext() (map[string]string, string) { return t.env, t.dir }

func TestCheckStatusMapping(t *testing.T) {
	tests := []struct {
		name string
		got  checkHealth
		want string
	}{
		{"http 200", httpHealth(200), structs.CheckSuccess},
		{"http 204", httpHealth(204), structs.CheckSuccess},
		{"http 299", httpHealth(299), structs.CheckSuccess},
		{"http 301", httpHealth(301), structs.CheckFailure},
		{"http 404", httpHealth(404), structs.CheckFailure},
		{"http 429", httpHealth(429), CheckWarning},
		{"http 500", httpHealth(500), structs.CheckFailure},
		{"http 199", httpHealth(199), structs.CheckFailure},
		{"script 0", scriptHealth(0), structs.CheckSuccess},
		{"script 1", scriptHealth(1), CheckWarning},
		{"script 2", scriptHealth(2), structs.CheckFailure},
		{"script 127", scriptHealth(127), structs.CheckFailure},
		{"initial passing", initialHealth("passing"), structs.CheckSuccess},
		{"initial warning", initialHealth("warning"), CheckWarning},
		{"initial critical", initialHealth("critical"), structs.CheckFailure},
		{"initial unset", initialHealth(""), structs.CheckPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got.reported(); got != tt.want {
				t.Errorf("reported %q, want %q", got, tt.want)
			}
			if back := healthFromReported(tt.got.reported()); back != tt.got {
				t.Errorf("status %q reads back as %d, want %d", tt.want, back, tt.got)
			}
		})
	}
}

func TestCheckObserveThresholds(t *testing.T) {
	now := time.Unix(1000, 0)
	pass, fail := checkOutcome{health: checkPassing}, checkOutcome{health: checkCritical}
	tests := []struct {
		name    string
		check   structs.ServiceCheck
		initial checkHealth
		runs    []checkOutcome
		want    []bool // changed after each run
		final   checkHealth
	}{
		{"first pass flips", structs.ServiceCheck{}, checkPending, []checkOutcome{pass, pass}, []bool{true, false}, checkPassing},
		{"first failure flips a pending check", structs.ServiceCheck{FailuresBeforeCritical: 3}, checkPending, []checkOutcome{fail}, []bool{true}, checkCritical},
		{"success_before_passing", structs.ServiceCheck{SuccessBeforePassing: 3}, checkCritical, []checkOutcome{pass, pass, pass}, []bool{false, false, true}, checkPassing},
		{"failures_before_critical", structs.ServiceCheck{FailuresBeforeCritical: 2}, checkPassing, []checkOutcome{fail, pass, fail, fail}, []bool{false, false, false, true}, checkCritical},
		{"same status twice reports once", structs.ServiceCheck{}, checkPassing, []checkOutcome{fail, fail}, []bool{true, false}, checkCritical},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &checkState{spec: &checkSpec{check: &tt.check}, health: tt.initial}
			st.reported = st.status(tt.initial, 0, "", now)
			for i, o := range tt.runs {
				if got := st.observe(o, now); got != tt.want[i] {
					t.Errorf("run %d: changed %v, want %v", i+1, got, tt.want[i])
				}
			}
			if st.health != tt.final || st.reported.Status != tt.final.reported() {
				t.Errorf("health %d (reported %q), want %d", st.health, st.reported.Status, tt.final)
			}
		})
	}
}

func TestTruncateOutput(t *testing.T) {
	long := strings.Repeat("é", structs.MaxCheckOutputBytes) // 2 bytes each
	got := truncateOutput(long)
	if len(got) > structs.MaxCheckOutputBytes || len(got) < structs.MaxCheckOutputBytes-1 {
		t.Fatalf("truncated to %d bytes, want about %d", len(got), structs.MaxCheckOutputBytes)
	}
	if !strings.HasPrefix(long, got) || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("truncation broke a character")
	}
	if truncateOutput("short") != "short" {
		t.Fatalf("short output changed")
	}
}

// A script check of a task whose driver cannot run commands in it is
// critical with the reason; its output is bounded.
func TestScriptCheckWithoutExec(t *testing.T) {
	tr := &fakeTask{spec: &structs.Task{Name: "t", Driver: "docker"}}
	o := runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "script", Command: "true"}, execIn: tr})
	if o.health != checkCritical || !strings.Contains(o.output, `"docker" cannot run commands`) {
		t.Fatalf("outcome %+v, want critical naming the driver", o)
	}
	raw := &fakeTask{spec: &structs.Task{Name: "t", Driver: rawExecDriver}, env: map[string]string{"PATH": os.Getenv("PATH")}, dir: t.TempDir()}
	o = runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "script", Command: "/bin/sh",
		Args: []string{"-c", "head -c 100000 /dev/zero | tr '\\0' x; exit 1"}, Timeout: 10 * time.Second}, execIn: raw})
	if o.health != checkWarning || len(o.output) != structs.MaxCheckOutputBytes {
		t.Fatalf("outcome %v with %d bytes of output, want warning with %d", o.health, len(o.output), structs.MaxCheckOutputBytes)
	}
	start := time.Now()
	o = runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "script", Command: "/bin/sleep",
		Args: []string{"60"}, Timeout: 200 * time.Millisecond}, execIn: raw})
	if o.health != checkCritical || !strings.Contains(o.output, "timed out") || time.Since(start) > 10*time.Second {
		t.Fatalf("outcome %+v after %s, want critical timed out", o, time.Since(start))
	}
}

func TestCheckRestartCounting(t *testing.T) {
	start := time.Unix(1000, 0)
	fail, warn, pass := checkOutcome{health: checkCritical}, checkOutcome{health: checkWarning}, checkOutcome{health: checkPassing}
	tests := []struct {
		name string
		cr   *structs.CheckRestart
		runs []checkOutcome
		at   time.Duration // after the task's start
		want []bool
	}{
		{"no check_restart", nil, []checkOutcome{fail, fail}, time.Minute, []bool{false, false}},
		{"limit reached", &structs.CheckRestart{Limit: 2}, []checkOutcome{fail, fail, fail, fail}, time.Minute, []bool{false, true, false, true}},
		{"a pass resets", &structs.CheckRestart{Limit: 2}, []checkOutcome{fail, pass, fail, fail}, time.Minute, []bool{false, false, false, true}},
		{"warnings count", &structs.CheckRestart{Limit: 1}, []checkOutcome{warn}, time.Minute, []bool{true}},
		{"ignore_warnings", &structs.CheckRestart{Limit: 1, IgnoreWarnings: true}, []checkOutcome{warn}, time.Minute, []bool{false}},
		{"grace", &structs.CheckRestart{Limit: 1, Grace: 2 * time.Minute}, []checkOutcome{fail}, time.Minute, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &checkState{spec: &checkSpec{check: &structs.ServiceCheck{CheckRestart: tt.cr}}}
			for i, o := range tt.runs {
				if got := st.wantsRestart(o, start, start.Add(tt.at)); got != tt.want[i] {
					t.Errorf("run %d: restart %v, want %v", i+1, got, tt.want[i])
				}
			}
		})
	}
}

func TestHTTPCheckTLSAndRequest(t *testing.T) {
	var got atomic.Value
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64)
		n, _ := r.Body.Read(b)
		got.Store(fmt.Sprintf("%s %s host=%s body=%s", r.Method, r.URL.Path, r.Host, b[:n]))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer s.Close()
	addr := s.Listener.Addr().String()
	tests := []struct {
		name  string
		check structs.ServiceCheck
		want  checkHealth
	}{
		{"unknown certificate", structs.ServiceCheck{Type: "http", Protocol: "https", Path: "/x"}, checkCritical},
		{"tls_skip_verify", structs.ServiceCheck{Type: "http", Protocol: "https", Path: "/x", TLSSkipVerify: true}, checkPassing},
		{"plain http to a TLS port", structs.ServiceCheck{Type: "http", Path: "/x"}, checkCritical},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check.Timeout = 5 * time.Second
			o := runCheck(context.Background(), &checkSpec{check: &tt.check, addr: addr})
			if o.health != tt.want {
				t.Fatalf("health %d (%s), want %d", o.health, o.output, tt.want)
			}
		})
	}
	ck := &structs.ServiceCheck{Type: "http", Protocol: "https", Path: "/p", Method: "PUT", Body: "hello", TLSSkipVerify: true,
		TLSServerName: "example.com", Header: map[string][]string{"Host": {"svc.example"}}, Timeout: 5 * time.Second}
	if o := runCheck(context.Background(), &checkSpec{check: ck, addr: addr}); o.health != checkPassing || o.code != 204 {
		t.Fatalf("outcome %+v", o)
	}
	if g := got.Load(); g != "PUT /p host=svc.example body=hello" {
		t.Fatalf("server saw %q", g)
	}
	// A check that outlives its timeout is critical.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	o := runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "http", Path: "/", Timeout: 100 * time.Millisecond}, addr: slow.Listener.Addr().String()})
	if o.health != checkCritical {
		t.Fatalf("slow check %+v, want critical", o)
	}
}
