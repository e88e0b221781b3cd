package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/httpapi/logstream"
	"github.com/drover-org/drover/core/structs"
)

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// fakeClient serves logs of one alloc: chunks written one Write each; with
// follow it then blocks until the request ends.
type fakeClient struct {
	allocID string
	chunks  []string

	mu   sync.Mutex
	args []any
}

func (c *fakeClient) AllocLogs(ctx context.Context, allocID, task, logType, origin string, offset int64, follow bool, w io.Writer) error {
	c.mu.Lock()
	c.args = []any{allocID, task, logType, origin, offset, follow}
	c.mu.Unlock()
	if allocID != c.allocID {
		return structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	}
	if task != "t" {
		return structs.NewError(structs.ErrNotFound, "Unknown task %q", task)
	}
	for _, ch := range c.chunks {
		if _, err := w.Write([]byte(ch)); err != nil {
			return err
		}
	}
	if follow {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (c *fakeClient) lastArgs() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.args
}

func TestAllocLogsPlain(t *testing.T) {
	client := &fakeClient{allocID: "a1", chunks: []string{"hello ", "world\n"}}
	api, _ := newTestAPI(t, Config{Client: client})
	rec := do(t, api.Handler(), "GET", "/v1/client/fs/logs/a1?task=t&type=stderr&plain=true&origin=end&offset=5", "")
	mustOK(t, rec)
	if rec.Body.String() != "hello world\n" {
		t.Errorf("body %q", rec.Body.String())
	}
	want := []any{"a1", "t", "stderr", "end", int64(5), false}
	for i, a := range client.lastArgs() {
		if a != want[i] {
			t.Errorf("arg %d = %v, want %v", i, a, want[i])
		}
	}
}

func TestAllocLogsFramed(t *testing.T) {
	big := strings.Repeat("x", logstream.MaxFrameData+10)
	client := &fakeClient{allocID: "a1", chunks: []string{"line1\n", big}}
	api, _ := newTestAPI(t, Config{Client: client})
	rec := do(t, api.Handler(), "GET", "/v1/client/fs/logs/a1?task=t&type=stdout&offset=100", "")
	mustOK(t, rec)
	dec := json.NewDecoder(rec.Body)
	var frames []logstream.Frame
	for {
		var f logstream.Frame
		if err := dec.Decode(&f); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		frames = append(frames, f)
	}
	if len(frames) != 3 {
		t.Fatalf("%d frames, want 3 (one write, then a write split at %d bytes)", len(frames), logstream.MaxFrameData)
	}
	var data strings.Builder
	for _, f := range frames {
		data.Write(f.Data)
		if f.File != "alloc/logs/t.stdout.0" {
			t.Errorf("File = %q", f.File)
		}
	}
	if data.String() != "line1\n"+big {
		t.Errorf("data differs (%d bytes)", data.Len())
	}
	if frames[0].Offset != 106 || frames[2].Offset != int64(106+len(big)) {
		t.Errorf("offsets %d, %d", frames[0].Offset, frames[2].Offset)
	}
}

func TestAllocLogsErrors(t *testing.T) {
	client := &fakeClient{allocID: "a1"}
	api, fake := newTestAPI(t, Config{Client: client})
	seedCluster(t, fake) // aaaa1111 lives on node-b, which has no HTTP address
	tests := []struct {
		target string
		code   int
		want   string
	}{
		{"/v1/client/fs/logs/a1?type=stdout", 400, "task"},
		{"/v1/client/fs/logs/a1?task=t", 400, "log type"},
		{"/v1/client/fs/logs/a1?task=t&type=stdin", 400, "invalid log type"},
		{"/v1/client/fs/logs/a1?task=t&type=stdout&origin=middle", 400, "origin"},
		{"/v1/client/fs/logs/a1?task=t&type=stdout&offset=-3", 400, "offset"},
		{"/v1/client/fs/logs/a1?task=t&type=stdout&follow=perhaps", 400, "follow"},
		{"/v1/client/fs/logs/a1?task=nope&type=stdout", 404, `Unknown task "nope"`},
		{"/v1/client/fs/logs/zzzz?task=t&type=stdout", 404, `Unknown allocation "zzzz"`},
		{"/v1/client/fs/logs/aaaa1111?task=t&type=stdout", 503, "advertises no HTTP address"},
	}
	for _, tc := range tests {
		rec := do(t, api.Handler(), "GET", tc.target, "")
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %q, want %d with %q", tc.target, rec.Code, rec.Body.String(), tc.code, tc.want)
		}
	}
}

func TestAllocLogsForwardedToNode(t *testing.T) {
	// The node agent: runs a client that knows the alloc.
	nodeAPI, _ := newTestAPI(t, Config{Client: &fakeClient{allocID: "aaaa2222", chunks: []string{"from the node\n"}}})
	nodeSrv := httptest.NewServer(nodeAPI.Handler())
	defer nodeSrv.Close()

	// The server agent: no client; its state says where the alloc runs.
	serverAPI, fake := newTestAPI(t, Config{})
	seedCluster(t, fake)
	node, _ := fake.store.NodeByID(nil, "node-a")
	n := *node
	n.HTTPAddr = strings.TrimPrefix(nodeSrv.URL, "http://")
	seedNode(t, fake.store, 30, &n)

	rec := do(t, serverAPI.Handler(), "GET", "/v1/client/fs/logs/aaaa2222?task=t&type=stdout&plain=true", "")
	mustOK(t, rec)
	if rec.Body.String() != "from the node\n" {
		t.Errorf("body %q", rec.Body.String())
	}

	// A forwarded request is never forwarded again.
	req := httptest.NewRequest("GET", "/v1/client/fs/logs/aaaa2222?task=t&type=stdout", nil)
	req.Header.Set(headerForwarded, "1")
	rec = httptest.NewRecorder()
	serverAPI.Handler().ServeHTTP(rec, req)
	if rec.Code != 404 {
		t.Errorf("re-forwarded: %d %q", rec.Code, rec.Body.String())
	}
}

func TestAllocLogsFollowHeartbeat(t *testing.T) {
	client := &fakeClient{allocID: "a1", chunks: []string{"first\n"}}
	api, _ := newTestAPI(t, Config{Client: client})
	api.logHeartbeat = 10 * time.Millisecond
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/client/fs/logs/a1?task=t&type=stdout&follow=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	var f logstream.Frame
	if err := dec.Decode(&f); err != nil || string(f.Data) != "first\n" {
		t.Fatalf("first frame %+v, %v", f, err)
	}
	// The stream stays open and idle: the next frame is a heartbeat.
	var hb logstream.Frame
	if err := dec.Decode(&hb); err != nil {
		t.Fatal(err)
	}
	if hb.Offset != 0 || len(hb.Data) != 0 || hb.File != "" {
		t.Errorf("heartbeat frame %+v, want {}", hb)
	}
	cancel()
}

func TestAllocLogsNoClientNoNode(t *testing.T) {
	api, _ := newTestAPI(t, Config{})
	rec := do(t, api.Handler(), "GET", "/v1/client/fs/logs/nope?task=t&type=stdout", "")
	if rec.Code != 404 {
		t.Errorf("%d %q", rec.Code, rec.Body.String())
	}
}
