package httpapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/plugins/builtin"
)

// aclTestServer is a real dev server with ACLs on, behind the HTTP API.
// devServer is a real dev-mode server, leader of itself, shut down with
// the test.
func devServer(t testing.TB, aclEnabled bool) *server.Server {
	t.Helper()
	return devServerDrivers(t, aclEnabled, "raw_exec")
}

// devServerDrivers is devServer knowing the given task drivers.
func devServerDrivers(t testing.TB, aclEnabled bool, drivers ...string) *server.Server {
	t.Helper()
	srv, err := server.New(server.Config{Logger: hclog.NewNullLogger(), DevMode: true, ACLEnabled: aclEnabled,
		Schedulers: builtin.InProcess{}, KnownDrivers: drivers, HeartbeatTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return srv
}

func aclTestServer(t *testing.T, aclEnabled bool) *nomadapi.Client {
	t.Helper()
	srv := devServer(t, aclEnabled)
	h := New(serverConfig(srv, Config{}))
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The official client bootstraps, creates a one-time token and exchanges
// it exactly once.
func TestACLBootstrapAndOneTimeTokenWithNomadClient(t *testing.T) {
	c := aclTestServer(t, true)
	mgmt, wm, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	if mgmt.Type != "management" || mgmt.SecretID == "" || mgmt.AccessorID == "" || wm.LastIndex == 0 || mgmt.CreateTime.IsZero() {
		t.Fatalf("bootstrap token = %+v, index %d", mgmt, wm.LastIndex)
	}
	if _, _, err := c.ACLTokens().Bootstrap(nil); err == nil || !strings.Contains(err.Error(), "ACL bootstrap already done") {
		t.Fatalf("second bootstrap: %v", err)
	}

	// Without a token no one-time token is given.
	if _, _, err := c.ACLTokens().UpsertOneTimeToken(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("anonymous one-time token: %v", err)
	}
	c.SetSecretID(mgmt.SecretID)
	ott, _, err := c.ACLTokens().UpsertOneTimeToken(nil)
	if err != nil {
		t.Fatal(err)
	}
	if ott.AccessorID != mgmt.AccessorID || ott.OneTimeSecretID == "" || time.Until(ott.ExpiresAt) < 9*time.Minute {
		t.Fatalf("one-time token = %+v", ott)
	}
	c.SetSecretID("")
	got, _, err := c.ACLTokens().ExchangeOneTimeToken(ott.OneTimeSecretID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.SecretID != mgmt.SecretID || got.AccessorID != mgmt.AccessorID {
		t.Fatalf("exchange gave %+v", got)
	}
	if _, _, err := c.ACLTokens().ExchangeOneTimeToken(ott.OneTimeSecretID, nil); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("second exchange: %v", err)
	}
}

func TestACLRoutesWithACLsDisabled(t *testing.T) {
	c := aclTestServer(t, false)
	if _, _, err := c.ACLTokens().Bootstrap(nil); err == nil || !strings.Contains(err.Error(), "ACL support disabled") {
		t.Fatalf("bootstrap with ACLs off: %v", err)
	}
	if _, _, err := c.ACLTokens().ExchangeOneTimeToken("0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11", nil); err == nil || !strings.Contains(err.Error(), "ACL support disabled") {
		t.Fatalf("exchange with ACLs off: %v", err)
	}
}
