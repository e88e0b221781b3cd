package agent

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/internal/testtier"
)

// startMonitoredDevAgent is startDevAgent with the intercept logger the
// drover command gives its agent, so /v1/agent/monitor can stream it.
func startMonitoredDevAgent(t *testing.T) (*Agent, *Config) {
	t.Helper()
	testtier.Agent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP = ln.Addr().(*net.TCPAddr).Port
	cfg.Ports.RPC = freePort(t)
	logs := &lockedBuffer{}
	logger := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "agent", Level: hclog.Info, Output: logs})
	a, err := New(cfg, Options{Logger: logger, HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"}, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(a.Shutdown)
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	})
	return a, cfg
}

// Nomad's agent and operator surfaces through the official client against
// a dev agent: self with the sections `nomad agent-info` prints, members
// and Raft peers with the server's real RPC address, regions, scheduler
// workers, the log monitor, profiles (a dev agent serves them as
// enable_debug does), and join and force-leave refused with reasons.
func TestNomadAPIAgentOps(t *testing.T) {
	a, cfg := startMonitoredDevAgent(t)
	c := nomadClient(t, a.HTTPAddr())
	rpcPort := strconv.Itoa(cfg.Ports.RPC)

	waitFor(t, "a leader", func() (bool, string) {
		l, err := c.Status().Leader()
		return err == nil && l != "", l
	})

	self, err := c.Agent().Self()
	if err != nil {
		t.Fatalf("Self: %v", err)
	}
	if self.Stats["raft"]["state"] != "Leader" || self.Stats["nomad"]["leader"] != "true" ||
		self.Stats["nomad"]["leader_addr"] != "127.0.0.1:"+rpcPort || self.Stats["runtime"]["goroutines"] == "" {
		t.Errorf("Self().Stats = %v; want raft state Leader, nomad leader true at 127.0.0.1:%s, runtime goroutines", self.Stats, rpcPort)
	}

	members, err := c.Agent().Members()
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	if len(members.Members) != 1 {
		t.Fatalf("Members = %+v; want one", members.Members)
	}
	m := members.Members[0]
	if m.Addr != "127.0.0.1" || strconv.Itoa(int(m.Port)) != rpcPort || m.Tags["port"] != rpcPort || m.Status != "alive" || m.Tags["leader"] != "true" {
		t.Errorf("member %+v; want 127.0.0.1:%s alive, the leader", m, rpcPort)
	}
	raftConf, err := c.Operator().RaftGetConfiguration(nil)
	if err != nil {
		t.Fatalf("RaftGetConfiguration: %v", err)
	}
	if len(raftConf.Servers) != 1 || raftConf.Servers[0].Address != "127.0.0.1:"+rpcPort || !raftConf.Servers[0].Leader {
		t.Errorf("raft configuration %+v; want the leader at 127.0.0.1:%s", raftConf.Servers, rpcPort)
	}
	regions, err := c.Regions().List()
	if err != nil || len(regions) != 1 || regions[0] != "global" {
		t.Errorf("Regions = %v, %v; want [global]", regions, err)
	}

	workers, err := c.Agent().GetSchedulerWorkersInfo(nil)
	if err != nil {
		t.Fatalf("GetSchedulerWorkersInfo: %v", err)
	}
	wcfg, err := c.Agent().GetSchedulerWorkerConfig(nil)
	if err != nil {
		t.Fatalf("GetSchedulerWorkerConfig: %v", err)
	}
	if len(workers.Schedulers) != wcfg.NumSchedulers || wcfg.NumSchedulers == 0 || workers.ServerID != m.Name {
		t.Errorf("workers %+v, config %+v; want NumSchedulers workers of server %q", workers, wcfg, m.Name)
	}
	for _, w := range workers.Schedulers {
		if w.Status != "Started" || w.Started == "" || len(w.EnabledSchedulers) == 0 {
			t.Errorf("worker %+v; want a started worker with its schedulers", w)
		}
	}
	if _, err := c.Agent().SetSchedulerWorkerConfig(*wcfg, nil); err != nil {
		t.Errorf("SetSchedulerWorkerConfig(the running config): %v", err)
	}
	if _, err := c.Agent().SetSchedulerWorkerConfig(nomad.SchedulerWorkerPoolArgs{NumSchedulers: -1, EnabledSchedulers: wcfg.EnabledSchedulers}, nil); err == nil ||
		!strings.Contains(err.Error(), "400 (Invalid request)") {
		t.Errorf("SetSchedulerWorkerConfig(-1): %v; want Nomad's 400 Invalid request", err)
	}

	// The monitor streams what the agent logs, here the request lines
	// its HTTP server logs at debug.
	stop := make(chan struct{})
	defer close(stop)
	frames, errs := c.Agent().Monitor(stop, &nomad.QueryOptions{Params: map[string]string{"log_level": "debug"}})
	var got bytes.Buffer
	waitFor(t, "the monitor to show a request", func() (bool, string) {
		_, _, _ = c.Jobs().Info("monitor-probe", nil)
		select {
		case f := <-frames:
			if f != nil {
				got.Write(f.Data)
			}
		case err := <-errs:
			t.Fatalf("Monitor: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		return strings.Contains(got.String(), "/v1/job/monitor-probe"), got.String()
	})

	heap, err := c.Agent().Lookup("goroutine", nomad.PprofOptions{Debug: 1}, nil)
	if err != nil || !bytes.Contains(heap, []byte("goroutine profile:")) {
		t.Errorf("Lookup(goroutine): %v %.100q", err, heap)
	}
	cpu, err := c.Agent().CPUProfile(nomad.PprofOptions{Seconds: 1}, nil)
	if err != nil || len(cpu) < 2 || cpu[0] != 0x1f || cpu[1] != 0x8b {
		t.Errorf("CPUProfile: %v, %d bytes; want a gzipped profile", err, len(cpu))
	}
	if _, err := c.Agent().Lookup("nosuch", nomad.PprofOptions{}, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Lookup(nosuch): %v; want a 404", err)
	}

	// A dev server has no RPC to join through; force-leave of an unknown
	// server is a no-op, of an alive one refused.
	if n, err := c.Agent().Join("127.0.0.1:1"); err == nil || n != 0 || !strings.Contains(err.Error(), "dev mode") {
		t.Errorf("Join: %d, %v; want 0 and the dev mode refusal", n, err)
	}
	if err := c.Agent().ForceLeave("nosuch"); err != nil {
		t.Errorf("ForceLeave(nosuch): %v; want a no-op 200, as Nomad's", err)
	}
	if err := c.Agent().ForceLeave(m.Name); err == nil || !strings.Contains(err.Error(), "alive") {
		t.Errorf("ForceLeave(the live leader): %v; want a refusal saying it is alive", err)
	}
}

// A job whose ID holds the characters Nomad's own API test uses (slash,
// backslash, colon, newline, ?, & and a CJK character) registers, reads
// back under every job route through the official client (which
// path-escapes the ID), and deregisters.
func TestNomadAPITroublesomeJobID(t *testing.T) {
	a := startDevAgent(t)
	c := nomadClient(t, a.HTTPAddr())
	id := "job-id/with\\troublesome:characters\n?&字"
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _, err := c.Nodes().List(nil)
		return err == nil && len(nodes) == 1 && nodes[0].Status == "ready", fmt.Sprint(nodes, err)
	})
	job := sysbatchJob(id)
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("Register: %v", err)
	}
	got, _, err := c.Jobs().Info(id, nil)
	if err != nil || got.ID == nil || *got.ID != id {
		t.Fatalf("Info: %v, %v; want the job %q", got, err, id)
	}
	if sum, _, err := c.Jobs().Summary(id, nil); err != nil || sum.JobID != id {
		t.Errorf("Summary: %+v, %v", sum, err)
	}
	if vers, _, _, err := c.Jobs().Versions(id, false, nil); err != nil || len(vers) != 1 {
		t.Errorf("Versions: %d, %v; want 1", len(vers), err)
	}
	if evals, _, err := c.Jobs().Evaluations(id, nil); err != nil || len(evals) == 0 || evals[0].JobID != id {
		t.Errorf("Evaluations: %v, %v; want the register's eval", evals, err)
	}
	waitFor(t, "the job's allocation", func() (bool, string) {
		allocs, _, err := c.Jobs().Allocations(id, true, nil)
		if err != nil {
			return false, err.Error()
		}
		return len(allocs) == 1 && allocs[0].JobID == id, ""
	})
	if _, _, err := c.Jobs().Deregister(id, true, nil); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	if _, _, err := c.Jobs().Info(id, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Info after purge: %v; want a 404", err)
	}
}
