package aclendpoint

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// testClock is a settable clock for Config.Now.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// testACL is an ACL over a real FSM without Raft: Apply encodes the entry
// as the server does and applies it at the next index, one at a time, as
// Raft would on the leader.
type testACL struct {
	*ACL
	fsm *fsm.FSM

	mu    sync.Mutex
	index uint64
	now   func() time.Time
}

func (h *testACL) State() *state.StateStore { return h.fsm.State() }

func (h *testACL) apply(t structs.MessageType, msg any) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := msg.(structs.Stamped); ok {
		st.StampNow(h.now().UnixNano())
	}
	buf, err := fsm.Encode(t, msg)
	if err != nil {
		return 0, err
	}
	if err := fsm.CheckEntry(buf); err != nil {
		return 0, structs.NewError(structs.ErrInvalid, "%v", err)
	}
	h.index++
	if resp, ok := h.fsm.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: buf}).(error); ok && resp != nil {
		return h.index, resp
	}
	return h.index, nil
}

// leading is a leaderrpc.Leader of a server that leads: nothing is
// forwarded.
type leading struct{}

func (leading) LeaderConn(context.Context) (*rpc.Conn, bool, error) { return nil, false, nil }

// newTestACL returns the ACL endpoints of a leading server; mut adjusts
// the config (ACLs are off unless it turns them on).
func newTestACL(t *testing.T, mut func(*Config)) *testACL {
	t.Helper()
	f, err := fsm.New(hclog.NewNullLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &testACL{fsm: f}
	cfg := Config{State: f.State, Apply: h.apply, Leader: leading{}, Logger: hclog.NewNullLogger()}
	if mut != nil {
		mut(&cfg)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h.now = cfg.Now
	h.ACL = New(cfg)
	return h
}

// aclServer is newTestACL with ACLs on and clock (nil: the wall clock).
func aclServer(t *testing.T, clock *testClock, mut func(*Config)) *testACL {
	t.Helper()
	return newTestACL(t, func(c *Config) {
		c.Enabled = true
		if clock != nil {
			c.Now = clock.Now
		}
		if mut != nil {
			mut(c)
		}
	})
}
