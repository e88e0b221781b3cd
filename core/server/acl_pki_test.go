package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/server/aclendpoint"
)

// The endpoints' own tests are in aclendpoint and pkiendpoint; these
// check the server's wiring of them.

// testClock is a settable clock for Config.Now.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func aclServer(t *testing.T, clock *testClock, mut func(*Config)) *Server {
	t.Helper()
	return testServer(t, func(c *Config) {
		c.ACLEnabled = true
		if clock != nil {
			c.Now = clock.Now
		}
		if mut != nil {
			mut(c)
		}
	})
}

// The leader's loop removes expired one-time tokens by itself.
func TestLeaderExpiresOneTimeTokens(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := aclServer(t, clock, func(c *Config) { c.OneTimeTokenGCInterval = 20 * time.Millisecond })
	mgmt, _, err := s.ACL().BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ott, _, err := s.ACL().UpsertOneTimeToken(ctx, mgmt.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(aclendpoint.OneTimeTokenTTL + time.Second)
	waitFor(t, 20*time.Second, "the leader removes an expired one-time token", func() bool {
		o, err := s.State().OneTimeTokenBySecret(nil, ott.OneTimeSecretID)
		return err == nil && o == nil
	})
}
