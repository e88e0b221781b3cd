package rpc

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func testJob() *structs.Job {
	restart := 30 * time.Second
	return &structs.Job{
		Region: "global", Namespace: "default", ID: "web", Name: "web",
		Type: "service", Priority: 50, Datacenters: []string{"dc1", "dc2"},
		Constraints: []*structs.Constraint{{LTarget: "${attr.kernel.name}", RTarget: "linux", Operand: "="}},
		Meta:        map[string]string{"owner": "team-a", "ünïcode": "✓"},
		Payload:     []byte{0, 1, 2, 0xff},
		Version:     7, SubmitTime: 1700000000123456789, ModifyIndex: 42,
		TaskGroups: []*structs.TaskGroup{{
			Name: "frontend", Count: 3, ShutdownDelay: &restart,
			RestartPolicy: &structs.RestartPolicy{Attempts: 2, Interval: time.Minute, Delay: 15 * time.Second, Mode: "fail"},
			Tasks: []*structs.Task{{
				Name: "server", Driver: "raw_exec",
				Config: map[string]any{
					"command": "/bin/sleep",
					"args":    []any{"10", "--flag"},
					"nested":  map[string]any{"debug": true, "name": "x"},
				},
				Env:       map[string]string{"PORT": "8080"},
				Resources: &structs.Resources{CPU: 500, MemoryMB: 256},
			}},
		}},
	}
}

func testAlloc() *structs.Allocation {
	yes := true
	at := time.Unix(1700000000, 123000000).UTC()
	return &structs.Allocation{
		ID: "8ba85cef-0000-4000-8000-000000000001", Namespace: "default", EvalID: "e1",
		Name: "web.frontend[0]", NodeID: "n1", JobID: "web", Job: testJob(), TaskGroup: "frontend",
		Resources:         &structs.Resources{CPU: 500, MemoryMB: 256},
		DesiredStatus:     structs.AllocDesiredStatusRun,
		DesiredTransition: structs.DesiredTransition{Migrate: &yes},
		ClientStatus:      structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"server": {
			State: "running", Restarts: 1, StartedAt: at,
			Events: []*structs.TaskEvent{{Type: "Started", Time: at.UnixNano(), Details: map[string]string{"k": "v"}}},
		}},
		CreateIndex: 10, ModifyIndex: 11, CreateTime: at.UnixNano(),
	}
}

// TestCallRoundTrip sends drover structs through a real gRPC connection and
// expects them back unchanged.
func TestCallRoundTrip(t *testing.T) {
	srv := NewServer(nil, nil)
	Handle(srv, "Job.Echo", func(_ context.Context, j *structs.Job) (*structs.Job, error) { return j, nil })
	Handle(srv, "Alloc.Echo", func(_ context.Context, a *structs.Allocation) (*structs.Allocation, error) { return a, nil })
	ln := listen(t)
	serve(t, srv, ln)
	c := dial(t, ln.Addr().String(), nil)
	ctx := context.Background()

	tests := []struct {
		name string
		call func() (want, got any, err error)
	}{
		{"job", func() (any, any, error) {
			got, err := Call[structs.Job, structs.Job](ctx, c, "Job.Echo", testJob())
			return testJob(), got, err
		}},
		{"allocation", func() (any, any, error) {
			got, err := Call[structs.Allocation, structs.Allocation](ctx, c, "Alloc.Echo", testAlloc())
			return testAlloc(), got, err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, got, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("round trip changed the value:\nwant %#v\ngot  %#v", want, got)
			}
		})
	}
}

func TestNilRequestAndResponse(t *testing.T) {
	srv := NewServer(nil, nil)
	var sawReq bool
	Handle(srv, "Noop", func(_ context.Context, r *structs.Job) (*structs.Job, error) {
		sawReq = r != nil
		return nil, nil
	})
	ln := listen(t)
	serve(t, srv, ln)
	c := dial(t, ln.Addr().String(), nil)
	resp, err := Call[structs.Job, structs.Job](context.Background(), c, "Noop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp == nil || !sawReq {
		t.Fatalf("want non-nil request and response, got req=%v resp=%v", sawReq, resp)
	}
}

// TestErrorKindsCrossTheWire checks both the gRPC code on the wire and the
// error Call rebuilds from it.
func TestErrorKindsCrossTheWire(t *testing.T) {
	multi := &structs.ValidationError{Errors: []string{`group "g": count must be >= 0`, "task \"t\": driver required ✗"}}
	tests := []struct {
		name     string
		err      error
		wantCode codes.Code
		wantKind error // nil: unkinded
		wantVE   []string
	}{
		{"not found", structs.NewError(structs.ErrNotFound, "job %q not found", "web"), codes.NotFound, structs.ErrNotFound, nil},
		{"wrapped not found", errorsJoinf("alloc lookup", structs.ErrNotFound), codes.NotFound, structs.ErrNotFound, nil},
		{"permission denied", structs.ErrPermissionDenied, codes.PermissionDenied, structs.ErrPermissionDenied, nil},
		{"no leader", structs.ErrNoLeader, codes.Unavailable, structs.ErrNoLeader, nil},
		{"invalid", structs.NewError(structs.ErrInvalid, "bad\nmultiline ünïcode"), codes.InvalidArgument, structs.ErrInvalid, nil},
		{"conflict", structs.NewError(structs.ErrConflict, "index mismatch"), codes.FailedPrecondition, structs.ErrConflict, nil},
		{"unavailable", structs.NewError(structs.ErrUnavailable, "plugin down"), codes.Unavailable, structs.ErrUnavailable, nil},
		{"unkinded", errors.New("disk on fire"), codes.Unknown, nil, nil},
		{"validation one", &structs.ValidationError{Errors: []string{"missing ID"}}, codes.InvalidArgument, nil, []string{"missing ID"}},
		{"validation many", multi, codes.InvalidArgument, nil, multi.Errors},
		{"validation wrapped", errorsJoinf("job web", multi), codes.InvalidArgument, nil, multi.Errors},
	}

	srv := NewServer(nil, nil)
	byName := make(map[string]error)
	Handle(srv, "Fail", func(_ context.Context, name *string) (*string, error) { return nil, byName[*name] })
	for _, tc := range tests {
		byName[tc.name] = tc.err
	}
	ln := listen(t)
	serve(t, srv, ln)
	c := dial(t, ln.Addr().String(), nil)

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			name := tc.name
			var raw string
			wireErr := c.cc.Invoke(ctx, "/"+ServiceName+"/Fail", &name, &raw)
			if got := status.Code(wireErr); got != tc.wantCode {
				t.Errorf("wire code %v, want %v", got, tc.wantCode)
			}

			_, err := Call[string, string](ctx, c, "Fail", &name)
			if err == nil {
				t.Fatal("want an error")
			}
			if err.Error() != tc.err.Error() {
				t.Errorf("message %q, want %q", err.Error(), tc.err.Error())
			}
			if got, want := structs.KindName(err), structs.KindName(tc.err); got != want {
				t.Errorf("kind %q, want %q", got, want)
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantKind)
			}
			if tc.wantVE != nil {
				var ve *structs.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("%T is not a *ValidationError", err)
				}
				if !reflect.DeepEqual(ve.Errors, tc.wantVE) {
					t.Errorf("validation errors %q, want %q", ve.Errors, tc.wantVE)
				}
			}
			if tc.wantKind == nil && tc.wantVE == nil && errors.Is(err, structs.ErrUnavailable) {
				t.Errorf("a handler's unkinded error must not read as a transport failure: %v", err)
			}
		})
	}
}

func errorsJoinf(prefix string, err error) error {
	return &wrapped{prefix: prefix, err: err}
}

type wrapped struct {
	prefix string
	err    error
}

func (w *wrapped) Error() string { return w.prefix + ": " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// TestBlockingCall checks that a long poll carries no deadline of this
// layer's making and ends on the server when the caller gives up.
func TestBlockingCall(t *testing.T) {
	started := make(chan bool, 1)
	ended := make(chan error, 1)
	srv := NewServer(nil, nil)
	Handle(srv, "Block", func(ctx context.Context, _ *string) (*string, error) {
		_, hasDeadline := ctx.Deadline()
		started <- hasDeadline
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	ln := listen(t)
	serve(t, srv, ln)
	c := dial(t, ln.Addr().String(), nil)

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() {
			_, err := Call[string, string](ctx, c, "Block", nil)
			res <- err
		}()
		if hasDeadline := <-started; hasDeadline {
			t.Error("server context has a deadline the caller never set")
		}
		cancel()
		select {
		case err := <-res:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("want context.Canceled, got %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Call did not return after cancel")
		}
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("handler context not canceled")
		}
	})

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := Call[string, string](ctx, c, "Block", nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("want context.DeadlineExceeded, got %v", err)
		}
		if hasDeadline := <-started; !hasDeadline {
			t.Error("the caller's deadline did not reach the server")
		}
		<-ended
	})
}

// TestTransportFailures: an unreachable or vanished peer reads as
// ErrUnavailable, fast, whatever the caller's own deadline.
func TestTransportFailures(t *testing.T) {
	t.Run("peer down", func(t *testing.T) {
		ln := listen(t)
		addr := ln.Addr().String()
		_ = ln.Close()
		c := dial(t, addr, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := Call[string, string](ctx, c, "Anything", nil)
		if !errors.Is(err, structs.ErrUnavailable) {
			t.Fatalf("want ErrUnavailable, got %v", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("took %v to notice a refused connection", took)
		}
	})

	t.Run("server stops mid call", func(t *testing.T) {
		started := make(chan struct{})
		srv := NewServer(nil, nil)
		Handle(srv, "Block", func(ctx context.Context, _ *string) (*string, error) {
			close(started)
			<-ctx.Done()
			return nil, nil
		})
		ln := listen(t)
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		c := dial(t, ln.Addr().String(), nil)
		res := make(chan error, 1)
		go func() {
			_, err := Call[string, string](context.Background(), c, "Block", nil)
			res <- err
		}()
		<-started
		srv.Stop()
		<-done
		select {
		case err := <-res:
			if !errors.Is(err, structs.ErrUnavailable) {
				t.Errorf("want ErrUnavailable, got %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Call did not return after the server stopped")
		}
	})

	t.Run("unknown method", func(t *testing.T) {
		srv := NewServer(nil, nil)
		ln := listen(t)
		serve(t, srv, ln)
		c := dial(t, ln.Addr().String(), nil)
		_, err := Call[string, string](context.Background(), c, "No.Such", nil)
		if err == nil || errors.Is(err, structs.ErrUnavailable) || structs.KindName(err) != "" {
			t.Errorf("want an unkinded error, got %v", err)
		}
	})
}

func TestHandlerPanicIsAnError(t *testing.T) {
	srv := NewServer(nil, nil)
	Handle(srv, "Panic", func(context.Context, *string) (*string, error) { panic("boom") })
	Handle(srv, "Ok", func(context.Context, *string) (*string, error) { s := "ok"; return &s, nil })
	ln := listen(t)
	serve(t, srv, ln)
	c := dial(t, ln.Addr().String(), nil)
	_, err := Call[string, string](context.Background(), c, "Panic", nil)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("want the panic as an error, got %v", err)
	}
	got, err := Call[string, string](context.Background(), c, "Ok", nil)
	if err != nil || *got != "ok" {
		t.Fatalf("server unusable after a handler panic: %v", err)
	}
}

func TestHandleMisuse(t *testing.T) {
	noop := func(context.Context, *string) (*string, error) { return nil, nil }
	tests := []struct {
		name  string
		setup func(s *Server, ln net.Listener)
		want  string
	}{
		{"after serve", func(s *Server, ln net.Listener) {
			serve(t, s, ln)
			// Serve registers under the server's lock; wait until it has.
			waitFor(t, 5*time.Second, "serve to start", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.serving
			})
			Handle(s, "Late", noop)
		}, "after Serve"},
		{"duplicate", func(s *Server, _ net.Listener) { Handle(s, "Dup", noop); Handle(s, "Dup", noop) }, "duplicate"},
		{"bad name", func(s *Server, _ net.Listener) { Handle(s, "a/b", noop) }, "invalid method name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(nil, nil)
			ln := listen(t)
			t.Cleanup(func() { _ = ln.Close() })
			defer func() {
				p := recover()
				msg, _ := p.(string)
				if !strings.Contains(msg, tc.want) {
					t.Fatalf("want a panic mentioning %q, got %v", tc.want, p)
				}
			}()
			tc.setup(s, ln)
		})
	}
}

func TestPool(t *testing.T) {
	srv := NewServer(nil, nil)
	Handle(srv, "Echo", func(_ context.Context, s *string) (*string, error) { return s, nil })
	ln := listen(t)
	serve(t, srv, ln)
	addr := ln.Addr().String()

	p := NewPool(nil)
	c1, err := p.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := p.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	if c1 != c2 {
		t.Fatal("pool dialed the same address twice")
	}
	msg := "hi"
	if got, err := Call[string, string](context.Background(), c1, "Echo", &msg); err != nil || *got != msg {
		t.Fatalf("call through pool: %v", err)
	}

	p.Close()
	if _, err := p.Get(addr); !errors.Is(err, structs.ErrUnavailable) {
		t.Errorf("Get after Close: want ErrUnavailable, got %v", err)
	}
	if _, err := Call[string, string](context.Background(), c1, "Echo", &msg); !errors.Is(err, structs.ErrUnavailable) {
		t.Errorf("call on a closed pool's conn: want ErrUnavailable, got %v", err)
	}
}
