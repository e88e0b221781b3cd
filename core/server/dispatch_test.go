package server

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/golang/snappy"

	"github.com/drover-org/drover/core/structs"
)

func paramJob(id, payload string) *structs.Job {
	j := testJob(id, "sysbatch")
	j.Meta = map[string]string{"owner": "ops", "color": "parent"}
	j.ParameterizedJob = &structs.ParameterizedJobConfig{Payload: payload, MetaRequired: []string{"color"}, MetaOptional: []string{"size"}}
	return j
}

// assertNoChildren checks that a refused dispatch wrote nothing.
func assertNoChildren(t *testing.T, s *Server, parent string, before uint64) {
	t.Helper()
	if c := childrenOf(t, s, parent); len(c) != 0 {
		t.Fatalf("refused dispatch wrote %d children", len(c))
	}
	if got := s.State().LatestIndex(); got != before {
		t.Fatalf("refused dispatch wrote to state: index %d -> %d", before, got)
	}
}

func TestDispatchRefusals(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	registerJob(t, s, paramJob("opt", structs.DispatchPayloadOptional))
	registerJob(t, s, paramJob("forbid", structs.DispatchPayloadForbidden))
	registerJob(t, s, paramJob("need", structs.DispatchPayloadRequired))
	plain := registerJob(t, s, testJob("plain", "sysbatch"))
	waitEvalTerminal(t, s, plain.EvalID) // nothing else writes while refusals are checked
	registerJob(t, s, paramJob("stopped", structs.DispatchPayloadOptional))
	if _, err := s.Jobs().Deregister(ctx, "", "stopped", false); err != nil {
		t.Fatal(err)
	}
	ok := map[string]string{"color": "blue"}

	cases := []struct {
		name   string
		req    structs.JobDispatchRequest
		kind   error // nil: a ValidationError (400)
		status int
		msg    []string
	}{
		{name: "required meta missing", req: structs.JobDispatchRequest{JobID: "opt", Meta: map[string]string{"size": "L"}},
			status: 400, msg: []string{"did not provide required meta keys", "color"}},
		{name: "unpermitted meta", req: structs.JobDispatchRequest{JobID: "opt", Meta: map[string]string{"color": "x", "zone": "a", "arch": "b"}},
			status: 400, msg: []string{"unpermitted metadata keys: [arch zone]"}},
		{name: "payload forbidden", req: structs.JobDispatchRequest{JobID: "forbid", Meta: ok, Payload: []byte("x")},
			status: 400, msg: []string{"Payload: not allowed"}},
		{name: "payload required", req: structs.JobDispatchRequest{JobID: "need", Meta: ok},
			status: 400, msg: []string{"Payload: required"}},
		{name: "payload over 16 KiB", req: structs.JobDispatchRequest{JobID: "opt", Meta: ok, Payload: make([]byte, 16*1024+1)},
			status: 400, msg: []string{"Payload: exceeds maximum size; 16385 > 16384 bytes"}},
		{name: "priority out of range", req: structs.JobDispatchRequest{JobID: "opt", Meta: ok, Priority: 101},
			status: 400, msg: []string{"Priority: 101"}},
		{name: "several problems at once", req: structs.JobDispatchRequest{JobID: "forbid", Payload: []byte("x")},
			status: 400, msg: []string{"2 errors occurred", "Payload: not allowed", "color"}},
		{name: "not parameterized", req: structs.JobDispatchRequest{JobID: "plain"},
			kind: structs.ErrInvalid, status: 400, msg: []string{`"plain" is not a parameterized job`}},
		{name: "stopped parent", req: structs.JobDispatchRequest{JobID: "stopped", Meta: ok},
			kind: structs.ErrInvalid, status: 400, msg: []string{"is stopped"}},
		{name: "unknown parent", req: structs.JobDispatchRequest{JobID: "ghost", Meta: ok},
			kind: structs.ErrNotFound, status: 404, msg: []string{"job not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.State().LatestIndex()
			req := tc.req
			_, err := s.Jobs().Dispatch(ctx, "", &req)
			if err == nil {
				t.Fatal("dispatch accepted")
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Fatalf("err %v, want kind %v", err, tc.kind)
			}
			var ve *structs.ValidationError
			if tc.kind == nil && !errors.As(err, &ve) {
				t.Fatalf("err %T %v, want a ValidationError", err, err)
			}
			if got := structs.HTTPStatus(err); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("error %q does not mention %q", err, m)
				}
			}
			assertNoChildren(t, s, req.JobID, before)
		})
	}
}

func TestDispatchCreatesChild(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	registerNodes(t, s, testNode("a"))
	resp := registerJob(t, s, paramJob("pp", structs.DispatchPayloadOptional))
	if resp.EvalID != "" {
		t.Fatal("a parameterized parent got an eval")
	}
	payload := bytes.Repeat([]byte("drover "), 100)

	cases := []struct {
		name    string
		req     structs.JobDispatchRequest
		idRE    string
		meta    map[string]string
		payload []byte
		prio    int
	}{
		{
			name: "meta merged and payload compressed",
			req:  structs.JobDispatchRequest{JobID: "pp", Meta: map[string]string{"color": "blue", "size": "L"}, Payload: payload},
			idRE: `^pp/dispatch-\d+-[0-9a-f]{8}$`,
			meta: map[string]string{"owner": "ops", "color": "blue", "size": "L"}, payload: payload, prio: 50,
		},
		{
			name: "prefix template and priority",
			req:  structs.JobDispatchRequest{JobID: "pp", Meta: map[string]string{"color": "red"}, IdPrefixTemplate: "nightly", Priority: 70},
			idRE: `^pp/dispatch-nightly-\d+-[0-9a-f]{8}$`,
			meta: map[string]string{"owner": "ops", "color": "red"}, prio: 70,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			dr, err := s.Jobs().Dispatch(ctx, "", &req)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(tc.idRE).MatchString(dr.DispatchedJobID) {
				t.Fatalf("child ID %q does not match %s", dr.DispatchedJobID, tc.idRE)
			}
			if dr.EvalID == "" || dr.EvalCreateIndex == 0 || dr.JobCreateIndex == 0 || dr.Index == 0 {
				t.Fatalf("response %+v", dr)
			}
			child, _ := s.State().JobByID(nil, "default", dr.DispatchedJobID)
			if child == nil || !child.Dispatched || child.ParentID != "pp" || child.Name != child.ID || child.Priority != tc.prio {
				t.Fatalf("child = %+v", child)
			}
			if child.IsParameterized() || child.IsParent() {
				t.Fatal("a dispatched child must not be a parent itself")
			}
			if len(child.Meta) != len(tc.meta) {
				t.Fatalf("meta = %v, want %v", child.Meta, tc.meta)
			}
			for k, v := range tc.meta {
				if child.Meta[k] != v {
					t.Fatalf("meta = %v, want %v", child.Meta, tc.meta)
				}
			}
			if tc.payload == nil {
				if child.Payload != nil {
					t.Fatalf("payload = %q, want none", child.Payload)
				}
			} else {
				got, err := snappy.Decode(nil, child.Payload)
				if err != nil || !bytes.Equal(got, tc.payload) {
					t.Fatalf("payload not snappy-compressed: %v", err)
				}
				if len(child.Payload) >= len(tc.payload) {
					t.Fatalf("stored payload (%d bytes) is not compressed (%d)", len(child.Payload), len(tc.payload))
				}
			}
			ev := waitEvalTerminal(t, s, dr.EvalID)
			if ev.TriggeredBy != structs.EvalTriggerJobRegister || ev.Status != structs.EvalStatusComplete || ev.JobID != child.ID {
				t.Fatalf("eval = %+v", ev)
			}
			if allocs, _ := s.State().AllocsByJob(nil, "default", child.ID, true); len(allocs) != 1 {
				t.Fatalf("child allocs = %d", len(allocs))
			}
		})
	}
	parent, _ := s.State().JobByID(nil, "default", "pp")
	if parent.Meta["color"] != "parent" || parent.Payload != nil {
		t.Fatalf("dispatch changed the parent: %+v", parent.Meta)
	}
}

func TestDispatchIdempotencyToken(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	registerJob(t, s, paramJob("idem", structs.DispatchPayloadOptional))
	req := func() *structs.JobDispatchRequest {
		return &structs.JobDispatchRequest{JobID: "idem", Meta: map[string]string{"color": "blue"}, IdempotencyToken: "tok-1"}
	}
	first, err := s.Jobs().Dispatch(ctx, "", req())
	if err != nil {
		t.Fatal(err)
	}
	waitEvalTerminal(t, s, first.EvalID)
	before := s.State().LatestIndex()
	again, err := s.Jobs().Dispatch(ctx, "", req())
	if err != nil {
		t.Fatal(err)
	}
	if again.DispatchedJobID != first.DispatchedJobID || again.JobCreateIndex != first.JobCreateIndex {
		t.Fatalf("same token gave %q, first %q", again.DispatchedJobID, first.DispatchedJobID)
	}
	if again.EvalID != "" || s.State().LatestIndex() != before {
		t.Fatal("an idempotent repeat wrote again")
	}
	other := req()
	other.IdempotencyToken = "tok-2"
	third, err := s.Jobs().Dispatch(ctx, "", other)
	if err != nil {
		t.Fatal(err)
	}
	if third.DispatchedJobID == first.DispatchedJobID {
		t.Fatal("a different token returned the same child")
	}
	if n := len(childrenOf(t, s, "idem")); n != 2 {
		t.Fatalf("children = %d, want 2", n)
	}
}
