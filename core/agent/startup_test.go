package agent

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/internal/testtier"
)

// startupCase is one agent start that must fail.
type startupCase struct {
	name string
	// setup builds the config in dir (a fresh temp dir) and returns it
	// with what the error must say. It may hold a port itself: busy is
	// then a port the agent never owned.
	setup func(t *testing.T, dir string) (cfg *Config, want []string)
	// leaderWait overrides Options.LeaderWait.
	leaderWait time.Duration
}

// serverConfig is a lone server (and client) outside dev mode on free
// ports of loopback, with its data in dir.
func serverConfig(t *testing.T, dir string) *Config {
	return &Config{
		NodeName: "s1", Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, "data"), BindAddr: "127.0.0.1",
		LogLevel: "DEBUG", Ports: &Ports{HTTP: freePort(t), RPC: freePort(t)},
		Server: &ServerConfig{Enabled: true, BootstrapExpect: 1},
		Client: &ClientConfig{Enabled: true},
	}
}

// holdPort listens on a free port until the test ends.
func holdPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

func raftDBPath(cfg *Config) string {
	return filepath.Join(cfg.DataDir, "server", "raft", "raft.db")
}

// writeRaftState writes the Raft state of a two-server cluster whose other
// server never answers, so this one can never lead.
func writeRaftState(t *testing.T, cfg *Config) {
	t.Helper()
	dir := filepath.Dir(raftDBPath(cfg))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := raftboltdb.NewBoltStore(raftDBPath(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	rc := raft.DefaultConfig()
	rc.LocalID = "s1"
	rc.Logger = hclog.NewNullLogger()
	conf := raft.Configuration{Servers: []raft.Server{
		{ID: "s1", Address: raft.ServerAddress(net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Ports.RPC)))},
		{ID: "gone", Address: "127.0.0.1:1"},
	}}
	if err := raft.BootstrapCluster(rc, store, store, snaps, trans, conf); err != nil {
		t.Fatal(err)
	}
}

// validRaftDB is the raft.db of a server that ran: the state of
// writeRaftState, read back.
func validRaftDB(t *testing.T) []byte {
	t.Helper()
	cfg := serverConfig(t, t.TempDir())
	writeRaftState(t, cfg)
	b, err := os.ReadFile(raftDBPath(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var startupCases = []startupCase{
	{name: "http port in use", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		cfg.Ports.HTTP = holdPort(t)
		return cfg, []string{"http listener", "address already in use", strconv.Itoa(cfg.Ports.HTTP)}
	}},
	{name: "rpc port in use", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		cfg.Ports.RPC = holdPort(t)
		return cfg, []string{"rpc listener", "address already in use"}
	}},
	{name: "dev http port in use", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := DevConfig()
		cfg.Ports.HTTP, cfg.Ports.RPC = holdPort(t), freePort(t)
		return cfg, []string{"http listener", "address already in use"}
	}},
	{name: "unwritable data dir", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		// A file where a directory must be: root ignores permission bits.
		writeFile(t, filepath.Join(dir, "file"), []byte("x"), 0o600)
		cfg.DataDir = filepath.Join(dir, "file", "data")
		return cfg, []string{"data dir", "not a directory"}
	}},
	{name: "snapshot dir blocked", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		// Fails after the log store is open: it must be closed again.
		writeFile(t, filepath.Join(filepath.Dir(raftDBPath(cfg)), "snapshots"), []byte("x"), 0o600)
		return cfg, []string{"raft snapshot store"}
	}},
	{name: "client state dir unwritable", setup: func(t *testing.T, dir string) (*Config, []string) {
		// Fails after the server leads: all of it must be stopped again.
		cfg := serverConfig(t, dir)
		writeFile(t, filepath.Join(dir, "file"), []byte("x"), 0o600)
		cfg.Client.StateDir = filepath.Join(dir, "file", "client")
		return cfg, []string{"client: ", "not a directory"}
	}},
	{name: "bad tls files", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		ca := filepath.Join(dir, "ca.pem")
		writeFile(t, ca, []byte("not a certificate"), 0o600)
		cfg.TLS = &TLSConfig{RPC: true, CAFile: ca, CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
		return cfg, []string{"tls.ca_file " + ca + ": holds no PEM certificate"}
	}},
	{name: "plugin that is not a plugin", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		cfg.PluginDir = filepath.Join(dir, "plugins")
		// It answers no handshake and would run on if left alone.
		writeFile(t, filepath.Join(cfg.PluginDir, "impostor"), []byte("#!/bin/sh\necho hello there\nexec sleep 600\n"), 0o755)
		cfg.Plugins = []*PluginConfig{{Name: "impostor"}}
		return cfg, []string{`launch plugin "impostor"`, "hello there"}
	}},
	{name: "truncated raft.db", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		db := validRaftDB(t)
		writeFile(t, raftDBPath(cfg), db[:len(db)/2], 0o600)
		return cfg, []string{raftDBPath(cfg), "truncated", "refusing to start", "restore"}
	}},
	{name: "garbage raft.db", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		writeFile(t, raftDBPath(cfg), bytes.Repeat([]byte("garbage!"), 4096), 0o600)
		return cfg, []string{raftDBPath(cfg), "corrupted", "refusing to start", "restore"}
	}},
	{name: "empty raft.db", setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		writeFile(t, raftDBPath(cfg), nil, 0o600)
		return cfg, []string{raftDBPath(cfg), "empty (0 bytes)", "refusing to start", "lose every job"}
	}},
	{name: "leader wait times out", leaderWait: 3 * time.Second, setup: func(t *testing.T, dir string) (*Config, []string) {
		cfg := serverConfig(t, dir)
		writeRaftState(t, cfg)
		return cfg, []string{"no cluster leader after 3s", "server_join"}
	}},
}

// Every failed start reports its real error and leaves nothing behind: no
// plugin process, no listening port, no dev temp dir, no open Raft store,
// no goroutine, and a raft.db it refused exactly as it was.
func TestFailedStartCleansUp(t *testing.T) {
	testtier.Agent(t)
	for _, tc := range startupCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// The dev temp dir is made under TMPDIR: make it one to watch.
			tmp := filepath.Join(dir, "tmp")
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			t.Setenv("TMPDIR", tmp)
			cfg, want := tc.setup(t, dir)
			dbBefore, dbErr := os.ReadFile(raftDBPath(cfg))
			ignore := goleak.IgnoreCurrent()

			logs := &lockedBuffer{}
			a, err := New(cfg, Options{
				Logger:     hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
				SelfExe:    os.Args[0],
				PluginEnv:  []string{testPluginEnv + "=1"},
				LeaderWait: tc.leaderWait,
			})
			if err == nil {
				a.Shutdown()
				t.Fatal("New succeeded; want a start-up error")
			}
			if a != nil {
				t.Errorf("New returned an agent with its error")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if t.Failed() {
				t.Logf("--- agent log ---\n%s", logs)
			}

			// Killed plugins are reaped by go-plugin's goroutines: allow
			// for that, but a leaked process never goes.
			waitFor(t, "no child processes", func() (bool, string) {
				kids := childProcesses(t)
				return len(kids) == 0, strings.Join(kids, ", ")
			})
			for _, p := range []int{cfg.Ports.HTTP, cfg.Ports.RPC} {
				if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
					ln.Close()
				} else if !portHeldByTest(tc.name, p, cfg) {
					t.Errorf("port %d still in use after a failed start: %v", p, err)
				}
			}
			if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
				t.Errorf("left in TMPDIR: %v", ents)
			}
			if _, err := os.Stat(raftDBPath(cfg)); err == nil {
				assertUnlocked(t, raftDBPath(cfg))
				if now, _ := os.ReadFile(raftDBPath(cfg)); dbErr == nil && !bytes.Equal(now, dbBefore) && !strings.Contains(tc.name, "leader") {
					t.Errorf("raft.db was changed by a start that refused it")
				}
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// portHeldByTest reports whether the case itself holds port p.
func portHeldByTest(name string, p int, cfg *Config) bool {
	return (strings.Contains(name, "http port") && p == cfg.Ports.HTTP) ||
		(strings.Contains(name, "rpc port") && p == cfg.Ports.RPC)
}

// assertUnlocked fails unless nobody holds a lock on path: bbolt holds
// one for as long as the store is open.
func assertUnlocked(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("%s is still locked (an open store) after a failed start: %v", path, err)
		return
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
