package leaderrpc

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

type echoArgs struct{ Kind string }
type echoReply struct{ Got string }

type fixedLeader struct {
	conn *rpc.Conn
	fwd  bool
	err  error
}

func (l fixedLeader) LeaderConn(context.Context) (*rpc.Conn, bool, error) {
	return l.conn, l.fwd, l.err
}

func TestForward(t *testing.T) {
	rs := rpc.NewServer(nil, hclog.NewNullLogger())
	kinds := map[string]error{"not-found": structs.ErrNotFound, "denied": structs.ErrPermissionDenied, "invalid": structs.ErrInvalid}
	rpc.Handle(rs, "Test.Echo", func(_ context.Context, a *echoArgs) (*echoReply, error) {
		if k, ok := kinds[a.Kind]; ok {
			return nil, structs.NewError(k, "refused: %s", a.Kind)
		}
		return &echoReply{Got: a.Kind}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rs.Serve(ln) }()
	t.Cleanup(rs.Stop)
	conn, err := rpc.Dial(ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := context.Background()

	// Served locally: nothing is sent.
	if r, fwd, err := Forward[echoArgs, echoReply](ctx, fixedLeader{}, "Test.Echo", &echoArgs{Kind: "x"}); fwd || r != nil || err != nil {
		t.Fatalf("leading: %v %v %v; want served here", r, fwd, err)
	}
	// No way to the leader: the Leader's error, kind intact.
	noLeader := structs.NewError(structs.ErrNoLeader, "No cluster leader")
	if _, fwd, err := Forward[echoArgs, echoReply](ctx, fixedLeader{fwd: true, err: noLeader}, "Test.Echo", &echoArgs{}); !fwd || !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("without a leader: %v %v", fwd, err)
	}
	l := fixedLeader{conn: conn, fwd: true}
	r, fwd, err := Forward[echoArgs, echoReply](ctx, l, "Test.Echo", &echoArgs{Kind: "ok"})
	if !fwd || err != nil || r.Got != "ok" {
		t.Fatalf("forwarded: %+v %v %v", r, fwd, err)
	}
	for name, kind := range kinds {
		if _, fwd, err := Forward[echoArgs, echoReply](ctx, l, "Test.Echo", &echoArgs{Kind: name}); !fwd || !errors.Is(err, kind) {
			t.Errorf("%s: %v %v; want kind %v", name, fwd, err, kind)
		}
	}
}
