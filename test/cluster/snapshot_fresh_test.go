package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// Disaster recovery into a fresh cluster, as docs/backups.md tells an
// operator to do it. A 3-server cluster with ACLs, a variable, an ACL
// policy, role and token, a JWT auth method and its binding rule, an
// autopilot setting and a client running a raw_exec task is backed up. Every server is stopped and its data dir
// wiped; the client agent is stopped (its task runs on). A fresh cluster
// on the same addresses is started, its first server seeded with the
// backup's CA (operator snapshot extract-ca), then bootstrapped and given
// the backup. Everything comes back: the job, the ACL objects (the old
// tokens work, the fresh bootstrap token is gone), the variable (readable:
// the keyring came back), the auth method and binding rule, the join
// tokens and CA (the old client rejoins
// with its stored certificate), the autopilot setting; and the client
// re-attaches to its still-running task: same allocation, same PID.
func TestSnapshotRestoreIntoFreshCluster(t *testing.T) {
	// Long heartbeats: the restored node must not be marked down while
	// its agent is started again after the restore.
	c := newCluster(t, options{clients: 1, heartbeatTTL: "30s", heartbeatGrace: "30s"})
	cl := c.clients[0]
	node := c.nodeID(cl)
	al := c.runSleeper("keeper")[node]
	var pid int
	harness.WaitFor(t, waitTimeout, "the task to record its pid", func() (bool, string) {
		var why string
		pid, why = taskPID(cl, al.ID)
		return pid != 0, why
	})

	// ACLs on: every server restarted with them, then bootstrapped.
	join := make([]string, len(c.servers))
	for i, s := range c.servers {
		join[i] = s.RPCAddr()
	}
	c.opts.agentExtra += aclStanza
	for _, s := range c.servers {
		s.stop()
	}
	for _, s := range c.servers {
		if err := s.writeConfig(join, c.opts); err != nil {
			t.Fatal(err)
		}
		s.restart()
	}
	c.waitPublicQuorum()
	oldBoot := bootstrapACL(t, c)
	setToken(c, oldBoot)
	l := c.leader()

	l.MustWrite(http.MethodPost, "/v1/acl/policy/reader", map[string]any{
		"Name": "reader", "Rules": `namespace "default" { policy = "read" }`,
	}, nil)
	l.MustWrite(http.MethodPost, "/v1/acl/role", map[string]any{
		"Name": "readers", "Policies": []map[string]string{{"Name": "reader"}},
	}, nil)
	var reader struct{ AccessorID, SecretID string }
	l.MustWrite(http.MethodPost, "/v1/acl/token", map[string]any{
		"Name": "ci", "Type": "client", "Policies": []string{"reader"},
	}, &reader)
	l.MustWrite(http.MethodPost, "/v1/acl/auth-method", map[string]any{
		"Name": "ci", "Type": "JWT", "TokenLocality": "local", "MaxTokenTTL": "1h",
		"Config": map[string]any{"JWTValidationPubKeys": []string{testPubKeyPEM(t)}, "BoundAudiences": []string{"drover"}},
	}, nil)
	l.MustWrite(http.MethodPost, "/v1/acl/binding-rule", map[string]any{
		"AuthMethod": "ci", "BindType": "role", "BindName": "readers",
	}, nil)
	l.MustWrite(http.MethodPut, "/v1/var/app/config", map[string]any{
		"Namespace": "default", "Path": "app/config", "Items": map[string]string{"password": "hunter2"},
	}, nil)
	setAutopilot(t, l, map[string]any{
		"CleanupDeadServers": true, "LastContactThreshold": "1s", "MaxTrailingLogs": 777,
		"ServerStabilizationTime": "10s", "MinQuorum": 0,
	})
	oldServerToken, oldClientToken := c.serverToken, c.clientToken

	file := filepath.Join(t.TempDir(), "backup.snap")
	l.MustCLI("operator", "snapshot", "save", file)

	// The loss: every server and its data; the client agent stops (as
	// the operator stops clients before a restore), its task runs on.
	cl.stop()
	if !harness.PIDAlive(pid) {
		t.Fatalf("task %d died with its client agent", pid)
	}
	for _, s := range c.servers {
		s.stop()
		if err := os.RemoveAll(s.DataDir); err != nil {
			t.Fatal(err)
		}
	}

	// The fresh cluster: the first server seeded with the backup's CA,
	// the others join with the backup's server join token.
	first := c.servers[0]
	first.MustCLI("operator", "snapshot", "extract-ca", "-data-dir", first.DataDir, file)
	if again := first.CLI("operator", "snapshot", "extract-ca", "-data-dir", first.DataDir, file); again.Code == 0 {
		t.Fatalf("extract-ca overwrote the CA of a seeded data dir:\n%s", again)
	}
	c.serverToken, c.clientToken = "", ""
	if err := first.writeConfig(join, c.opts); err != nil {
		t.Fatal(err)
	}
	first.restart()
	c.serverToken, c.clientToken = oldServerToken, oldClientToken
	for _, s := range c.servers[1:] {
		if err := s.writeConfig(join, c.opts); err != nil {
			t.Fatal(err)
		}
		s.restart()
	}
	c.waitPublicQuorum()
	setToken(c, "")
	freshBoot := bootstrapACL(t, c)
	setToken(c, freshBoot)
	if st, _, err := c.leader().Raw(http.MethodGet, "/v1/job/keeper", nil); err != nil || st != http.StatusNotFound {
		t.Fatalf("the fresh cluster answers %d %v for the job; want 404", st, err)
	}
	c.leader().MustCLI("operator", "snapshot", "restore", file)

	// The backup's state on every server, under the backup's token.
	setToken(c, oldBoot)
	for _, s := range c.servers {
		harness.WaitFor(t, waitTimeout, "the backup's state on "+s.Name, func() (bool, string) {
			st, _, err := s.Raw(http.MethodGet, "/v1/job/keeper?stale", nil)
			return err == nil && st == http.StatusOK, fmt.Sprintf("keeper: %d %v", st, err)
		})
	}
	l = c.leader()

	cases := []struct {
		name, token, path string
		want              int
	}{
		{"the backup's management token", oldBoot, "/v1/acl/token/self", http.StatusOK},
		{"the backup's client token", reader.SecretID, "/v1/acl/token/self", http.StatusOK},
		{"the fresh cluster's bootstrap token", freshBoot, "/v1/acl/token/self", http.StatusForbidden},
		{"the backup's client token reads jobs", reader.SecretID, "/v1/job/keeper", http.StatusOK},
		{"the role", oldBoot, "/v1/acl/roles", http.StatusOK},
	}
	for _, tc := range cases {
		api := *l.API
		api.Token = tc.token
		st, body, err := api.Raw(http.MethodGet, tc.path, nil)
		if err != nil || st != tc.want {
			t.Errorf("%s: GET %s answered %d %v (%s); want %d", tc.name, tc.path, st, err, body, tc.want)
		}
	}
	var roles []struct{ Name string }
	l.MustGet("/v1/acl/roles", &roles)
	if len(roles) != 1 || roles[0].Name != "readers" {
		t.Errorf("roles after the restore: %+v; want readers", roles)
	}
	var methods []struct{ Name string }
	l.MustGet("/v1/acl/auth-methods", &methods)
	if len(methods) != 1 || methods[0].Name != "ci" {
		t.Errorf("auth methods after the restore: %+v; want ci", methods)
	}
	var rules []struct{ ID, AuthMethod string }
	l.MustGet("/v1/acl/binding-rules", &rules)
	if len(rules) != 1 || rules[0].AuthMethod != "ci" {
		t.Errorf("binding rules after the restore: %+v; want one of ci", rules)
	} else {
		var rule struct{ BindType, BindName string }
		l.MustGet("/v1/acl/binding-rule/"+rules[0].ID, &rule)
		if rule.BindType != "role" || rule.BindName != "readers" {
			t.Errorf("binding rule after the restore: %+v; want role readers", rule)
		}
	}
	var v struct{ Items map[string]string }
	l.MustGet("/v1/var/app/config", &v)
	if v.Items["password"] != "hunter2" {
		t.Errorf("variable after the restore: %+v; want its item back, decrypted", v.Items)
	}
	// The restored keyring encrypts new writes too, readable on a follower.
	l.MustWrite(http.MethodPut, "/v1/var/app/after", map[string]any{
		"Namespace": "default", "Path": "app/after", "Items": map[string]string{"k": "v"},
	}, nil)
	f := c.followers(l)[0]
	harness.WaitFor(t, waitTimeout, "the variable written after the restore on "+f.Name, func() (bool, string) {
		var after struct{ Items map[string]string }
		st, err := f.Do(http.MethodGet, "/v1/var/app/after?stale", nil, &after)
		return err == nil && st == http.StatusOK && after.Items["k"] == "v", fmt.Sprintf("%d %v %v", st, err, after.Items)
	})
	var ap struct{ MaxTrailingLogs int }
	l.MustGet("/v1/operator/autopilot/configuration", &ap)
	if ap.MaxTrailingLogs != 777 {
		t.Errorf("autopilot MaxTrailingLogs after the restore: %d; want 777", ap.MaxTrailingLogs)
	}
	st, ct, err := l.JoinTokens(waitTimeout, nil)
	if err != nil || st != oldServerToken || ct != oldClientToken {
		t.Errorf("join tokens after the restore differ from the backup's (err %v)", err)
	}

	// The old client, with its stored certificate, rejoins and re-attaches.
	cl.restart()
	c.waitNodeReady(cl)
	harness.WaitFor(t, waitTimeout, "the client to report its task running", func() (bool, string) {
		var got harness.Alloc
		l.MustGet("/v1/allocation/"+al.ID, &got)
		ts := got.TaskStates["sleep"]
		return got.ClientStatus == "running" && ts != nil && ts.State == "running",
			fmt.Sprintf("client %s, task %+v", got.ClientStatus, ts)
	})
	if now, why := taskPID(cl, al.ID); now != pid {
		t.Errorf("task pid after the restore: %d (%s); want the same process %d", now, why, pid)
	}
	byNode, err := allocsByNode(l, "keeper")
	if err != nil {
		t.Fatal(err)
	}
	if got := byNode[node]; len(got) != 1 || got[0].ID != al.ID || got[0].ClientStatus != "running" {
		t.Errorf("allocations after the restore: %s; want only %s, running", describeAllocs(byNode), shortID(al.ID))
	}
}

// bootstrapACL bootstraps the ACL system through the leader and returns
// the management token's secret.
func bootstrapACL(t *testing.T, c *cluster) string {
	t.Helper()
	var boot struct{ SecretID, Type string }
	c.leader().MustWrite(http.MethodPost, "/v1/acl/bootstrap", nil, &boot)
	if boot.Type != "management" || boot.SecretID == "" {
		t.Fatalf("bootstrap answered %+v", boot)
	}
	return boot.SecretID
}

// setToken makes every agent's requests and CLI runs carry token.
func setToken(c *cluster, token string) {
	for _, a := range c.all() {
		a.Token = token
	}
}

// testPubKeyPEM is a fresh ECDSA public key in PEM, as an auth method's
// JWTValidationPubKeys holds them.
func testPubKeyPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
