package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// fingerprintPeriod is the test agent's client fingerprint_interval (the
// default is 30s): a change of the engine shows within one of them.
const fingerprintPeriod = 2 * time.Second

// engineProxy stands between the driver and the Docker engine: it accepts
// on a unix socket of its own and copies each connection to and from
// /var/run/docker.sock. Stopping it closes the socket and every open
// connection, which to the driver is an engine that went away.
type engineProxy struct {
	t    *testing.T
	path string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newEngineProxy(t *testing.T) *engineProxy {
	// A short path: a unix socket's is limited to about 108 bytes.
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &engineProxy{t: t, path: filepath.Join(dir, "docker.sock"), conns: map[net.Conn]struct{}{}}
	p.start()
	t.Cleanup(p.stop)
	return p
}

// start listens on the proxy's path and serves until stop.
func (p *engineProxy) start() {
	p.t.Helper()
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		p.t.Fatalf("engine proxy: %v", err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by stop
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c)
			}()
		}
	}()
}

func (p *engineProxy) serve(c net.Conn) {
	up, err := net.Dial("unix", "/var/run/docker.sock")
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	defer p.untrack(c, up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// track records an open pair, or closes it when the proxy stopped.
func (p *engineProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *engineProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// stop closes the listener (which removes the socket file) and every open
// connection, and waits for the copies to end.
func (p *engineProxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			p.t.Errorf("engine proxy close: %v", err)
		}
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// The engine goes away under a running agent: within a fingerprint period
// the node reports its docker driver unhealthy, and a docker job is not
// placed on it. The engine comes back: the driver is healthy again and the
// pending job places and runs.
func TestDockerEngineGoneAndBack(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	proxy := newEngineProxy(t)
	cfg := filepath.Join(t.TempDir(), "docker.hcl")
	if err := os.WriteFile(cfg, []byte("client {\n  fingerprint_interval = \""+fingerprintPeriod.String()+"\"\n}\nplugin \"docker\" {\n  config {\n    endpoint = \"unix://"+proxy.path+"\"\n    gc {\n      image = false\n    }\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "-config", cfg)
	docker := func() (struct{ Detected, Healthy bool }, string) {
		var nodes []harness.NodeStub
		a.MustGet("/v1/nodes", &nodes)
		if len(nodes) != 1 {
			return struct{ Detected, Healthy bool }{}, fmt.Sprintf("%+v", nodes)
		}
		return nodes[0].Drivers["docker"], fmt.Sprintf("%+v", nodes[0])
	}
	harness.WaitFor(t, waitTimeout, "a healthy docker driver through the proxy", func() (bool, string) {
		d, s := docker()
		return d.Healthy, s
	})

	proxy.stop()
	gone := time.Now()
	// One period for the next fingerprint, and slack for a loaded machine.
	harness.WaitFor(t, fingerprintPeriod+20*time.Second, "the docker driver to turn unhealthy", func() (bool, string) {
		d, s := docker()
		return !d.Healthy, s
	})
	t.Logf("docker unhealthy %s after the engine went away", time.Since(gone).Round(time.Millisecond))
	// The health description names the cause.
	var node struct {
		Drivers map[string]struct {
			Healthy           bool
			HealthDescription string
		}
	}
	a.MustGet("/v1/node/"+a.NodeID(), &node)
	if desc := node.Drivers["docker"].HealthDescription; !strings.Contains(desc, "Failed to connect to the docker engine at unix://"+proxy.path) {
		t.Errorf("docker health description = %q", desc)
	}

	job := writeJobFile(t, `job "docker-pending" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "echo placed after all"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`)
	a.MustCLI("job", "run", "-detach", job)
	harness.WaitFor(t, waitTimeout, "the job's placement to fail on the missing driver", func() (bool, string) {
		status := a.CLI("job", "status", "docker-pending")
		return strings.Contains(status.Stdout, "missing drivers"), status.String()
	})
	if allocs := a.AllocsOf("docker-pending"); len(allocs) != 0 {
		t.Fatalf("allocs placed while the engine was away: %+v", allocs)
	}

	proxy.start()
	back := time.Now()
	harness.WaitFor(t, fingerprintPeriod+20*time.Second, "the docker driver to be healthy again", func() (bool, string) {
		d, s := docker()
		return d.Healthy && d.Detected, s
	})
	t.Logf("docker healthy %s after the engine came back", time.Since(back).Round(time.Millisecond))
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the pending job to place and complete", func() (bool, string) {
		allocs = a.AllocsOf("docker-pending")
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	if logs := a.MustCLI("alloc", "logs", allocs[0].ID); logs.Stdout != "placed after all\n" {
		t.Errorf("alloc logs = %q", logs.Stdout)
	}
}
