package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/structs"
)

func nestedList(depth int) any {
	var v any = "leaf"
	for i := 0; i < depth; i++ {
		v = []any{v}
	}
	return v
}

// TestDeepJobRefused: the job of the report (a task config about 1,100
// levels deep) is refused at the HTTP edge with a 400 naming the limit, and
// refused by the server itself when it arrives another way (RPC, an
// embedding caller); either way nothing is committed.
func TestDeepJobRefused(t *testing.T) {
	s := testServer(t, nil)
	api := httpapi.New(httpConfig(s))

	body := `{"Job":{"ID":"deep","Type":"sysbatch","Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"args":` +
		strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}}]}]}}`
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/jobs", strings.NewReader(body)))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "MaxNestingDepth") {
		t.Fatalf("HTTP: %d %.300s, want 400 naming MaxNestingDepth", rec.Code, rec.Body.String())
	}

	before := s.State().LatestIndex()
	job := testJob("deep", "sysbatch")
	job.TaskGroups[0].Tasks[0].Config = map[string]any{"args": nestedList(1100)}
	_, err := s.Jobs().Register(context.Background(), job, false, 0)
	if structs.HTTPStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "MaxNestingDepth") {
		t.Fatalf("RegisterJob = %v, want an invalid-request refusal naming the limit", err)
	}
	// Below validation, the last guard: raftApply refuses an entry its
	// FSM could not decode.
	job.Canonicalize()
	_, err = s.raftApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Namespace: job.Namespace, JobID: job.ID})
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "could not apply") {
		t.Fatalf("raftApply = %v, want a refusal", err)
	}
	if got, _ := s.State().JobByID(nil, structs.DefaultNamespace, "deep"); got != nil {
		t.Fatal("the deep job was committed")
	}
	if after := s.State().LatestIndex(); after != before {
		t.Errorf("state index moved from %d to %d", before, after)
	}
	if s.Failed() != nil {
		t.Fatalf("server stopped: %v", s.Failed())
	}
}

// TestServerStopsAtBadEntry: a committed entry the FSM cannot apply (here
// proposed around the server's check, as an older version or a corrupt log
// would leave it) shuts the server down with one error naming the index and
// type, handed to OnFatal; a restart on the same log stops the same way
// instead of panicking in a loop.
func TestServerStopsAtBadEntry(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	fatal := make(chan error, 2)
	cfg := func(c *Config) {
		onDiskAlone(c, dir, addr)
		c.OnFatal = func(err error) { fatal <- err }
	}
	s := testServer(t, cfg)
	job := testJob("deep", "sysbatch")
	job.TaskGroups[0].Tasks[0].Config = map[string]any{"args": nestedList(1100)}
	bad, err := fsm.Encode(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	f := s.raft.Apply(bad, 10*time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	index := f.Index()
	want := []string{"index " + itoa(index), "type JobRegister", "maximum decoding depth exceeded"}
	checkFatal := func(what string) {
		t.Helper()
		select {
		case err := <-fatal:
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: fatal error %q lacks %q", what, err, w)
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: OnFatal not called", what)
		}
	}
	checkFatal("first run")
	if resp, ok := f.Response().(error); !ok || resp == nil {
		t.Errorf("entry response = %v, want the stop error", f.Response())
	}
	waitFor(t, 30*time.Second, "raft shut down", func() bool { return s.raft.State() == raft.Shutdown })
	if got, _ := s.State().JobByID(nil, structs.DefaultNamespace, "deep"); got != nil {
		t.Error("the bad entry wrote state")
	}

	// Restart on the same log: the entry is met again and stops again.
	c := Config{Logger: s.cfg.Logger, Schedulers: s.cfg.Schedulers, KnownDrivers: s.cfg.KnownDrivers, HeartbeatTTL: time.Minute}
	cfg(&c)
	s2, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Shutdown() })
	checkFatal("restart")
	if s2.Failed() == nil {
		t.Error("restarted server has no failure recorded")
	}
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
