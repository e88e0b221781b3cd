// Package dockerproxy stands between a docker client under test and the
// local Docker engine, so a test can take the engine away and bring it
// back without touching the engine itself: the proxy accepts on a unix
// socket of its own and copies each connection to and from the engine's.
// Stop closes the socket and every open connection, which to the client
// is an engine that went away; Start listens again.
package dockerproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// EngineSocket is the engine's socket the proxy forwards to.
const EngineSocket = "/var/run/docker.sock"

// Proxy is one socket proxy; New starts it and registers its Stop.
type Proxy struct {
	t    testing.TB
	path string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// New starts a proxy on a fresh socket; the test's cleanup stops it.
func New(t testing.TB) *Proxy {
	t.Helper()
	// A short path: a unix socket's is limited to about 108 bytes.
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &Proxy{t: t, path: filepath.Join(dir, "docker.sock"), conns: map[net.Conn]struct{}{}}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// Path is the proxy's socket path.
func (p *Proxy) Path() string { return p.path }

// Endpoint is the proxy's address as a docker endpoint (unix://…).
func (p *Proxy) Endpoint() string { return "unix://" + p.path }

// Start listens on the proxy's path and serves until Stop.
func (p *Proxy) Start() {
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
				return // closed by Stop
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c)
			}()
		}
	}()
}

func (p *Proxy) serve(c net.Conn) {
	up, err := net.Dial("unix", EngineSocket)
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
func (p *Proxy) track(cs ...net.Conn) bool {
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

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// Stop closes the listener (which removes the socket file) and every open
// connection, and waits for the copies to end. Stopping a stopped proxy
// does nothing.
func (p *Proxy) Stop() {
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
