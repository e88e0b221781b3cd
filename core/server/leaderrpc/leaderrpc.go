// Package leaderrpc forwards a write from a follower to the Raft leader
// for the endpoint packages beneath core/server, which cannot reach the
// server's own forwarding helper without importing core/server.
//
// The server decides where a write goes (Leader); this package makes the
// call. Forwarding is one hop: a request that arrived forwarded is never
// forwarded again.
package leaderrpc

import (
	"context"

	"github.com/drover-org/drover/core/rpc"
)

// Leader is how an endpoint reaches the leader.
//
// LeaderConn returns forward false when this server serves the write
// itself (it leads, or it runs without peers). Otherwise it returns the
// connection to the leader, waiting briefly for an election, or an error
// that keeps its structs kind: structs.ErrNoLeader when there is none or
// when ctx marks a request that was forwarded once already,
// structs.ErrUnavailable when the leader cannot be reached. The pool owns
// the returned connection: callers do not close it.
type Leader interface {
	LeaderConn(ctx context.Context) (conn *rpc.Conn, forward bool, err error)
}

// Forward sends req to the leader as method when this server does not
// lead, and reports whether it did: when forwarded is false the caller
// serves the request itself. The leader's error comes back with its kind
// (rpc.Call keeps it).
func Forward[Req, Resp any](ctx context.Context, l Leader, method string, req *Req) (resp *Resp, forwarded bool, err error) {
	conn, fwd, err := l.LeaderConn(ctx)
	if !fwd {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	resp, err = rpc.Call[Req, Resp](ctx, conn, method, req)
	return resp, true, err
}
