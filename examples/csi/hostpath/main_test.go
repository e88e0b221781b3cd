package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The binary serves on the endpoint given, replacing a stale socket, answers
// CSI calls, and returns cleanly when its context ends (SIGTERM in main).
func TestRunServesAndStops(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	// A stale socket file from an earlier run that died without cleaning up.
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	t.Setenv("CSI_ENDPOINT", "unix://"+sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-node-id", "n1", "-state-dir", filepath.Join(dir, "state"), "-log-level", "debug"}, &logs, &logs)
	}()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	// WaitForReady rides out the window before the driver replaces the
	// stale socket and listens; the deadline bounds it.
	callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
	defer callCancel()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("GetPluginInfo: %v\n%s", err, logs.String())
	}
	if info.GetName() != "hostpath.csi.drover.dev" {
		t.Fatalf("plugin name = %q", info.GetName())
	}
	ni, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || ni.GetNodeId() != "n1" {
		t.Fatalf("NodeGetInfo = %v, %v; want node n1", ni, err)
	}
	conn.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop after its context ended")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after stop: %v", err)
	}
	if !strings.Contains(logs.String(), "stopping") {
		t.Fatalf("no stop in the logs:\n%s", logs.String())
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-mode", "both", "-state-dir", t.TempDir()},
		{"-endpoint", "tcp://127.0.0.1:1", "-state-dir", t.TempDir()},
		{"-log-level", "loud", "-state-dir", t.TempDir()},
		{"extra"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
