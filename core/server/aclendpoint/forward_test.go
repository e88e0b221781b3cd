package aclendpoint

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// following is the leaderrpc.Leader of a follower: every write goes over
// conn (or fails with err).
type following struct {
	conn *rpc.Conn
	err  error
}

func (f following) LeaderConn(context.Context) (*rpc.Conn, bool, error) { return f.conn, true, f.err }

// serveLeader serves leader's endpoints over RPC on a loopback port and
// returns a connection to them.
func serveLeader(t *testing.T, leader *ACL) *rpc.Conn {
	t.Helper()
	rs := rpc.NewServer(nil, hclog.NewNullLogger())
	Register(rs, leader, func(ctx context.Context) context.Context { return ctx })
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
	return conn
}

// A follower's writes land on the leader, and the leader's refusals keep
// their kind on the way back.
func TestFollowerForwardsWithErrorKinds(t *testing.T) {
	ctx := context.Background()
	leader := aclServer(t, nil, nil)
	follower := aclServer(t, nil, func(c *Config) { c.Leader = following{conn: serveLeader(t, leader.ACL)} })

	mgmt, idx, err := follower.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if idx == 0 || !mgmt.IsManagement() {
		t.Fatalf("forwarded bootstrap gave %+v at %d", mgmt, idx)
	}
	if got, _ := leader.State().ACLTokenByAccessorID(nil, mgmt.AccessorID); got == nil {
		t.Fatal("the bootstrap token is not in the leader's state")
	}
	if got, _ := follower.State().ACLTokenByAccessorID(nil, mgmt.AccessorID); got != nil {
		t.Fatal("the follower wrote the bootstrap token itself")
	}

	tests := []struct {
		name string
		call func() error
		kind error
	}{
		{"bootstrap again", func() error { _, _, err := follower.BootstrapACL(ctx, ""); return err }, structs.ErrInvalid},
		{"policy write by an unknown secret", func() error {
			_, err := follower.UpsertACLPolicies(ctx, uuid.NewString(), []*structs.ACLPolicy{{Name: "p", Rules: `node { policy = "read" }`}})
			return err
		}, structs.ErrPermissionDenied},
		{"delete a missing policy", func() error {
			_, err := follower.DeleteACLPolicies(ctx, mgmt.SecretID, []string{"missing"})
			return err
		}, structs.ErrNotFound},
		{"delete a missing token", func() error {
			_, err := follower.DeleteACLTokens(ctx, mgmt.SecretID, []string{uuid.NewString()})
			return err
		}, structs.ErrNotFound},
		{"exchange of an unknown one-time token", func() error {
			_, _, err := follower.ExchangeOneTimeToken(ctx, uuid.NewString())
			return err
		}, structs.ErrPermissionDenied},
		{"one-time token without a secret", func() error { _, _, err := follower.UpsertOneTimeToken(ctx, ""); return err }, structs.ErrPermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want kind %v", err, tt.kind)
			}
		})
	}

	// A write the leader takes comes back with its answer.
	ott, _, err := follower.UpsertOneTimeToken(ctx, mgmt.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := follower.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID)
	if err != nil || tok.SecretID != mgmt.SecretID {
		t.Fatalf("forwarded exchange gave %+v, %v; want the management token", tok, err)
	}
}

// Without a way to the leader a write fails with the Leader's error, kind
// intact, and writes nothing locally.
func TestNoLeaderRefusesWrites(t *testing.T) {
	ctx := context.Background()
	noLeader := structs.NewError(structs.ErrNoLeader, "No cluster leader")
	a := aclServer(t, nil, func(c *Config) { c.Leader = following{err: noLeader} })
	if _, _, err := a.BootstrapACL(ctx, ""); !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("bootstrap without a leader: %v", err)
	}
	if a.State().ACLBootstrapIndex() != 0 || a.index != 0 {
		t.Fatal("a write without a leader reached the local state")
	}
	if _, err := a.ExpireOneTimeTokens(ctx, ""); !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("expire without a leader: %v", err)
	}
}

// An exchange ID reaches the Raft entry, so the leader takes only a UUID
// from a forwarding server, and writes nothing for another.
func TestExchangeRefusesNonUUIDExchangeID(t *testing.T) {
	ctx := context.Background()
	leader := aclServer(t, nil, nil)
	conn := serveLeader(t, leader.ACL)
	before := leader.State().LatestIndex()
	_, err := rpc.Call[ExchangeArgs, TokenReply](ctx, conn, "ACL.ExchangeOneTimeToken",
		&ExchangeArgs{SecretID: uuid.NewString(), ExchangeID: strings.Repeat("x", 1<<16)})
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "ExchangeID") {
		t.Fatalf("err = %v, want ErrInvalid naming ExchangeID", err)
	}
	if leader.State().LatestIndex() != before {
		t.Error("a refused exchange wrote to the state")
	}
}
