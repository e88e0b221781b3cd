package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// TestJoinTokenRotation: every server shows the cluster's join token
// (`drover operator join-token`), a rotation through any server refuses the
// old token to a new client while the joined client keeps working, and the
// new token joins.
func TestJoinTokenRotation(t *testing.T) {
	c := newCluster(t, options{clients: 1})
	var join []string
	for _, s := range c.servers {
		join = append(join, s.RPCAddr())
	}
	for _, s := range c.servers {
		harness.WaitFor(t, formTimeout, s.Name+" to show the client join token", func() (bool, string) {
			res := s.CLI("operator", "join-token", "client")
			return res.Code == 0 && strings.TrimSpace(res.Stdout) == c.clientToken, fmt.Sprintf("exit %d", res.Code)
		})
	}
	old := c.clientToken
	res := c.servers[2].MustCLI("operator", "join-token", "-rotate", "client")
	rotated := strings.TrimSpace(res.Stdout)
	if rotated == old || !strings.HasPrefix(rotated, "DRJT-1-") {
		t.Fatalf("rotation printed no new token (same as before: %v)", rotated == old)
	}

	ports := harness.FreePorts(t, 2)
	late := c.newAgent("late-old", false, ports[0], 0)
	c.clients = append(c.clients, late)
	if err := late.writeConfig(join, c.opts); err != nil {
		t.Fatal(err)
	}
	if err := late.launch(); err != nil {
		t.Fatal(err)
	}
	if _, ok := harness.Poll(formTimeout, 100*time.Millisecond, func() (bool, string) { return !late.Running(), "still running" }); !ok {
		for _, n := range []string{"late-old", "s1", "s2", "s3"} {
			b, _ := os.ReadFile(filepath.Join(c.dir, "logs", n+"-run1.log"))
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "join") || strings.Contains(line, "rotat") || strings.Contains(line, "PKI") {
					t.Logf("%s: %s", n, line)
				}
			}
		}
		t.Fatal("the client with the rotated-out token joined")
	}
	logs, _ := os.ReadFile(filepath.Join(c.dir, "logs", "late-old-run1.log"))
	if !strings.Contains(string(logs), "Permission denied") {
		t.Fatalf("the refused client does not say why:\n%s", logs)
	}
	if strings.Contains(string(logs), old[strings.LastIndex(old, "-")+1:]) {
		t.Fatal("the refused client's log quotes the token secret")
	}

	c.clientToken = rotated
	fresh := c.newAgent("late-new", false, ports[1], 0)
	c.clients = append(c.clients, fresh)
	if err := fresh.writeConfig(join, c.opts); err != nil {
		t.Fatal(err)
	}
	if err := fresh.launch(); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*agent{c.clients[0], fresh} {
		if _, err := c.pollNodeReady(cl, formTimeout); err != nil {
			t.Fatalf("%s after the rotation: %v", cl, err)
		}
	}
}

// TestCertRenewalKeepsTasks: with a 15 s certificate lifetime the client
// renews its certificate (twice) while its task keeps running as the same
// process and its node stays ready.
func TestCertRenewalKeepsTasks(t *testing.T) {
	c := newCluster(t, options{clients: 1, heartbeatTTL: "5s", heartbeatGrace: "5s", agentExtra: "tls {\n  cert_ttl = \"15s\"\n}\n\n"})
	cl := c.clients[0]
	node := c.nodeID(cl)
	al := c.runSleeper("renewal")[node]
	var pid int
	harness.WaitFor(t, waitTimeout, "the task to record its pid", func() (bool, string) {
		var why string
		pid, why = taskPID(cl, al.ID)
		return pid != 0, why
	})
	logPath := filepath.Join(c.dir, "logs", cl.Name+"-run1.log")
	harness.WaitFor(t, 2*formTimeout, "the client to renew its certificate twice", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		n := strings.Count(string(b), "certificate renewed")
		return n >= 2, fmt.Sprintf("%d renewals", n)
	})
	if now, why := taskPID(cl, al.ID); now != pid || !harness.PIDAlive(pid) {
		t.Fatalf("task after the renewals: pid %d (%s), alive %v; want the same process %d", now, why, harness.PIDAlive(pid), pid)
	}
	l := c.leader()
	var got harness.Alloc
	l.MustGet("/v1/allocation/"+al.ID, &got)
	if got.ClientStatus != "running" {
		t.Fatalf("allocation after the renewals: %s", got.ClientStatus)
	}
	if _, err := c.pollNodeReady(cl, formTimeout); err != nil {
		t.Fatal(err)
	}
}
