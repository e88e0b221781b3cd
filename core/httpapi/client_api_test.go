package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
)

// fakeClientAPI is a client holding one alloc (in namespace default)
// whose directory is dir; it records lifecycle calls.
type fakeClientAPI struct {
	fakeClient
	dir    string
	nodeID string

	mu    sync.Mutex
	calls []string
	meta  map[string]*string
}

func (c *fakeClientAPI) record(s string) {
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
}

func (c *fakeClientAPI) lastCall() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 {
		return ""
	}
	return c.calls[len(c.calls)-1]
}

func (c *fakeClientAPI) AllocNamespace(allocID string) (string, bool) {
	return "default", allocID == c.allocID
}

func (c *fakeClientAPI) NodeID() string { return c.nodeID }

func (c *fakeClientAPI) known(allocID string) error {
	if allocID != c.allocID {
		return structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	}
	return nil
}

func (c *fakeClientAPI) AllocFSList(allocID, path string) ([]*clientapi.FileInfo, error) {
	if err := c.known(allocID); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(c.dir, path))
	if err != nil {
		return nil, structs.NewError(structs.ErrNotFound, "%v", err)
	}
	var out []*clientapi.FileInfo
	for _, e := range ents {
		info, _ := e.Info()
		out = append(out, &clientapi.FileInfo{Name: e.Name(), IsDir: e.IsDir(), Size: info.Size(), FileMode: info.Mode().String(), ModTime: info.ModTime()})
	}
	return out, nil
}

func (c *fakeClientAPI) AllocFSStat(allocID, path string) (*clientapi.FileInfo, error) {
	if err := c.known(allocID); err != nil {
		return nil, err
	}
	info, err := os.Stat(filepath.Join(c.dir, path))
	if err != nil {
		return nil, structs.NewError(structs.ErrNotFound, "%v", err)
	}
	return &clientapi.FileInfo{Name: info.Name(), Size: info.Size(), FileMode: info.Mode().String(), ModTime: info.ModTime(), ContentType: "text/plain"}, nil
}

func (c *fakeClientAPI) AllocFSOpen(allocID, path string) (*os.File, error) {
	if err := c.known(allocID); err != nil {
		return nil, err
	}
	if strings.Contains(path, "secret") {
		return nil, structs.NewError(structs.ErrPermissionDenied, "path %q: refused", path)
	}
	f, err := os.Open(filepath.Join(c.dir, path))
	if os.IsNotExist(err) {
		return nil, structs.NewError(structs.ErrNotFound, "path %q: no such file", path)
	}
	return f, err
}

type fakeStream struct {
	f   *os.File
	pos int64
}

func (s *fakeStream) Offset() int64 { return s.pos }
func (s *fakeStream) Close() error  { return s.f.Close() }
func (s *fakeStream) Copy(ctx context.Context, follow bool, w io.Writer) error {
	if _, err := s.f.Seek(s.pos, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(w, s.f); err != nil {
		return err
	}
	if follow {
		<-ctx.Done()
	}
	return nil
}

func (c *fakeClientAPI) AllocFSStream(allocID, path, origin string, offset int64) (clientapi.FileStream, error) {
	f, err := c.AllocFSOpen(allocID, path)
	if err != nil {
		return nil, err
	}
	return &fakeStream{f: f, pos: offset}, nil
}

func (c *fakeClientAPI) HostStats() (*clientapi.HostStats, error) {
	return &clientapi.HostStats{Memory: &clientapi.HostMemoryStats{Total: 42}, Uptime: 7, CPU: []*clientapi.HostCPUStats{{CPU: "cpu0", Idle: 90}}}, nil
}

func (c *fakeClientAPI) AllocStats(allocID string) (*clientapi.AllocResourceUsage, error) {
	if err := c.known(allocID); err != nil {
		return nil, err
	}
	ru := &clientapi.ResourceUsage{MemoryStats: &clientapi.MemoryStats{RSS: 4096, Measured: []string{"RSS"}}, CpuStats: &clientapi.CPUStats{Percent: 12.5}}
	return &clientapi.AllocResourceUsage{ResourceUsage: ru, Tasks: map[string]*clientapi.TaskResourceUsage{"t": {ResourceUsage: ru, Timestamp: 1}}, Timestamp: 1}, nil
}

func (c *fakeClientAPI) AllocChecks(allocID string) (map[string]*structs.CheckStatus, error) {
	if err := c.known(allocID); err != nil {
		return nil, err
	}
	return map[string]*structs.CheckStatus{"c1": {ID: "c1", Check: "alive", Status: "success", Mode: "healthiness", Timestamp: 5}}, nil
}

func (c *fakeClientAPI) RestartAlloc(_ context.Context, allocID, task string, all bool) error {
	if err := c.known(allocID); err != nil {
		return err
	}
	if task != "" && all {
		return structs.NewError(structs.ErrInvalid, "task name cannot be set with AllTasks")
	}
	c.record("restart " + task + map[bool]string{true: " all"}[all])
	return nil
}

func (c *fakeClientAPI) SignalAlloc(_ context.Context, allocID, task, signal string) error {
	if err := c.known(allocID); err != nil {
		return err
	}
	if signal == "SIGNOPE" {
		return structs.NewError(structs.ErrInvalid, "Signal: unknown signal %q", signal)
	}
	c.record("signal " + task + " " + signal)
	return nil
}

func (c *fakeClientAPI) NodeMeta() *clientapi.NodeMetaResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	merged := map[string]string{"rack": "r1"}
	for k, v := range c.meta {
		if v != nil {
			merged[k] = *v
		}
	}
	return &clientapi.NodeMetaResponse{Meta: merged, Dynamic: c.meta, Static: map[string]string{"rack": "r1"}}
}

func (c *fakeClientAPI) ApplyNodeMeta(m map[string]*string) (*clientapi.NodeMetaResponse, error) {
	c.mu.Lock()
	if c.meta == nil {
		c.meta = map[string]*string{}
	}
	for k, v := range m {
		c.meta[k] = v
	}
	c.mu.Unlock()
	return c.NodeMeta(), nil
}

// clientAPIWorld is a server agent without a client (its state places
// alloc aaaa2222 on node-a) and node-a's agent, whose client holds it.
type clientAPIWorld struct {
	client     *fakeClientAPI
	serverURL  string
	nodeURL    string
	serverHTTP *HTTPServer
}

func newClientAPIWorld(t *testing.T) *clientAPIWorld {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "alloc", "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alloc", "logs", "out"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	fc := &fakeClientAPI{fakeClient: fakeClient{allocID: "aaaa2222"}, dir: dir, nodeID: "node-a"}
	nodeAPI, _ := newTestAPI(t, Config{Client: fc})
	// A followed stream the caller left ends at its next heartbeat.
	nodeAPI.logHeartbeat = 20 * time.Millisecond
	nodeSrv := httptest.NewServer(nodeAPI.Handler())
	t.Cleanup(nodeSrv.Close)

	serverAPI, fake := newTestAPI(t, Config{})
	serverAPI.logHeartbeat = 20 * time.Millisecond
	seedCluster(t, fake)
	node, _ := fake.store.NodeByID(nil, "node-a")
	n := *node
	n.HTTPAddr = strings.TrimPrefix(nodeSrv.URL, "http://")
	seedNode(t, fake.store, 30, &n)
	srv := httptest.NewServer(serverAPI.Handler())
	t.Cleanup(srv.Close)
	return &clientAPIWorld{client: fc, serverURL: srv.URL, nodeURL: nodeSrv.URL, serverHTTP: serverAPI}
}

func nomadClient(t *testing.T, addr string) *nomad.Client {
	t.Helper()
	c, err := nomad.NewClient(&nomad.Config{Address: addr, HttpClient: &http.Client{Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientAPIThroughNomadClient: every client endpoint, asked of the
// server agent, reaches the node's client and decodes in Nomad's
// official client.
func TestClientAPIThroughNomadClient(t *testing.T) {
	w := newClientAPIWorld(t)
	nc := nomadClient(t, w.serverURL)
	alloc := &nomad.Allocation{ID: "aaaa2222", NodeID: "node-a", Namespace: "default"}

	files, _, err := nc.AllocFS().List(alloc, "alloc/logs", nil)
	if err != nil || len(files) != 1 || files[0].Name != "out" || files[0].Size != 10 {
		t.Fatalf("List = %+v, %v", files, err)
	}
	fi, _, err := nc.AllocFS().Stat(alloc, "alloc/logs/out", nil)
	if err != nil || fi.Size != 10 || fi.ContentType != "text/plain" {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	readAll := func(rc io.ReadCloser, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := readAll(nc.AllocFS().Cat(alloc, "alloc/logs/out", nil)); got != "0123456789" {
		t.Errorf("Cat = %q", got)
	}
	if got := readAll(nc.AllocFS().ReadAt(alloc, "alloc/logs/out", 2, 3, nil)); got != "234" {
		t.Errorf("ReadAt(2, 3) = %q", got)
	}
	if got := readAll(nc.AllocFS().ReadAt(alloc, "alloc/logs/out", 7, 0, nil)); got != "789" {
		t.Errorf("ReadAt(7, no limit) = %q", got)
	}
	cancel := make(chan struct{})
	frames, errs := nc.AllocFS().Stream(alloc, "alloc/logs/out", "start", 4, cancel, nil)
	select {
	case f := <-frames:
		if f == nil || string(f.Data) != "456789" || f.File != "alloc/logs/out" || f.Offset != 10 {
			t.Errorf("first frame = %+v", f)
		}
	case err := <-errs:
		t.Fatalf("Stream: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no frame")
	}
	close(cancel)

	stats, err := nc.Allocations().Stats(alloc, nil)
	if err != nil || stats.Tasks["t"] == nil || stats.ResourceUsage.MemoryStats.RSS != 4096 || stats.ResourceUsage.CpuStats.Percent != 12.5 {
		t.Fatalf("Stats = %+v, %v", stats, err)
	}
	checks, err := nc.Allocations().Checks("aaaa2222", nil)
	if err != nil || checks["c1"].Status != "success" || checks["c1"].Timestamp != 5 {
		t.Fatalf("Checks = %+v, %v", checks, err)
	}
	if err := nc.Allocations().Restart(alloc, "t", nil); err != nil || w.client.lastCall() != "restart t" {
		t.Fatalf("Restart: %v (last call %q)", err, w.client.lastCall())
	}
	if err := nc.Allocations().RestartAllTasks(alloc, nil); err != nil || w.client.lastCall() != "restart  all" {
		t.Fatalf("RestartAllTasks: %v (last call %q)", err, w.client.lastCall())
	}
	if err := nc.Allocations().Signal(alloc, nil, "t", "SIGUSR1"); err != nil || w.client.lastCall() != "signal t SIGUSR1" {
		t.Fatalf("Signal: %v (last call %q)", err, w.client.lastCall())
	}
	host, err := nc.Nodes().Stats("node-a", nil)
	if err != nil || host.Memory.Total != 42 || host.Uptime != 7 || len(host.CPU) != 1 {
		t.Fatalf("node Stats = %+v, %v", host, err)
	}
	v := "blue"
	meta, err := nc.Nodes().Meta().Apply(&nomad.NodeMetaApplyRequest{NodeID: "node-a", Meta: map[string]*string{"color": &v}}, nil)
	if err != nil || meta.Meta["color"] != "blue" || meta.Static["rack"] != "r1" {
		t.Fatalf("meta Apply = %+v, %v", meta, err)
	}
	meta, err = nc.Nodes().Meta().Read("node-a", nil)
	if err != nil || meta.Meta["color"] != "blue" || *meta.Dynamic["color"] != "blue" {
		t.Fatalf("meta Read = %+v, %v", meta, err)
	}
}

// TestClientAPIErrors: statuses of bad requests, unknown allocations and
// nodes, asked of the server or of the node.
func TestClientAPIErrors(t *testing.T) {
	w := newClientAPIWorld(t)
	before := len(w.client.calls)
	for _, tc := range []struct {
		base, method, path, body string
		code                     int
	}{
		{w.serverURL, "GET", "/v1/client/fs/ls/nope?path=/", "", 404},
		{w.nodeURL, "GET", "/v1/client/fs/ls/nope?path=/", "", 404},
		{w.serverURL, "GET", "/v1/client/fs/cat/aaaa2222?path=secret", "", 403},
		{w.serverURL, "GET", "/v1/client/fs/cat/aaaa2222?path=missing", "", 404},
		{w.serverURL, "GET", "/v1/client/fs/readat/aaaa2222?path=alloc/logs/out&offset=-1", "", 400},
		{w.serverURL, "GET", "/v1/client/fs/readat/aaaa2222?path=alloc/logs/out&limit=x", "", 400},
		{w.serverURL, "GET", "/v1/client/fs/stream/aaaa2222?path=alloc/logs/out&origin=middle", "", 400},
		{w.serverURL, "GET", "/v1/client/fs/stream/aaaa2222?path=alloc/logs/out&follow=maybe", "", 400},
		{w.serverURL, "GET", "/v1/client/fs/ls/" + strings.Repeat("a", maxIDBytes+1), "", 400},
		{w.serverURL, "GET", "/v1/client/allocation/nope/stats", "", 404},
		{w.serverURL, "GET", "/v1/client/allocation/nope/checks", "", 404},
		{w.serverURL, "PUT", "/v1/client/allocation/nope/restart", "{}", 404},
		{w.serverURL, "PUT", "/v1/client/allocation/aaaa2222/restart", `{"TaskName":"t","AllTasks":true}`, 400},
		{w.serverURL, "PUT", "/v1/client/allocation/aaaa2222/restart", `{"TaskName":`, 400},
		{w.serverURL, "PUT", "/v1/client/allocation/aaaa2222/signal", `{"Signal":"SIGNOPE"}`, 400},
		{w.serverURL, "PUT", "/v1/client/allocation/aaaa2222/signal", `{"Task":"` + strings.Repeat("t", maxIDBytes+1) + `"}`, 400},
		{w.serverURL, "GET", "/v1/client/stats", "", 400}, // no client here: name a node
		{w.serverURL, "GET", "/v1/client/stats?node_id=nope", "", 404},
		{w.serverURL, "GET", "/v1/client/stats?node_id=node-b", "", 503}, // no HTTP address
		{w.serverURL, "GET", "/v1/client/metadata?node_id=nope", "", 404},
		{w.serverURL, "POST", "/v1/client/metadata", `{"NodeID":"nope","Meta":{}}`, 404},
		{w.serverURL, "POST", "/v1/client/metadata", `{"Meta":`, 400},
	} {
		req, _ := http.NewRequest(tc.method, tc.base+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d %q; want %d", tc.method, tc.path, resp.StatusCode, b, tc.code)
		}
	}
	if len(w.client.calls) != before {
		t.Errorf("refused requests reached the client: %v", w.client.calls[before:])
	}
}

// TestClientFSHeaders: a task's file is served as opaque bytes that a
// browser will not sniff into a page.
func TestClientFSHeaders(t *testing.T) {
	w := newClientAPIWorld(t)
	resp, err := http.Get(w.nodeURL + "/v1/client/fs/cat/aaaa2222?path=alloc/logs/out")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/octet-stream" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", resp.Header)
	}
}

// clientAPIMatrixCases are the ACL matrix's cases of the client-side
// API. The matrix's server runs no client and its allocs' nodes are
// unknown, so an allowed caller gets the forward's 404.
func clientAPIMatrixCases(w *aclWorld, nobody string) []matrixCase {
	team, def := w.allocs["team"], w.allocs["default"]
	var cases []matrixCase
	for _, op := range []string{"ls", "stat", "cat", "readat", "stream"} {
		p := "GET /v1/client/fs/" + op + "/{alloc}"
		cases = append(cases,
			matrixCase{p, "GET", "/v1/client/fs/" + op + "/" + team + "?path=/", nil, "--x-x"},
			// read-only has read-job, not read-fs, in default.
			matrixCase{p, "GET", "/v1/client/fs/" + op + "/" + def + "?path=/", nil, "----x"},
			matrixCase{p, "GET", "/v1/client/fs/" + op + "/" + nobody + "?path=/", nil, "----4"},
		)
	}
	for _, sub := range []string{"stats", "checks"} {
		p := "GET /v1/client/allocation/{alloc}/" + sub
		cases = append(cases,
			matrixCase{p, "GET", "/v1/client/allocation/" + team + "/" + sub, nil, "--x-x"},
			matrixCase{p, "GET", "/v1/client/allocation/" + def + "/" + sub, nil, "---xx"},
			matrixCase{p, "GET", "/v1/client/allocation/" + nobody + "/" + sub, nil, "----4"},
		)
	}
	for _, m := range []string{"PUT", "POST"} {
		for _, sub := range []string{"restart", "signal"} {
			p := m + " /v1/client/allocation/{alloc}/" + sub
			cases = append(cases,
				matrixCase{p, m, "/v1/client/allocation/" + team + "/" + sub, map[string]any{}, "--x-x"},
				// alloc-lifecycle is write's, not read's.
				matrixCase{p, m, "/v1/client/allocation/" + def + "/" + sub, map[string]any{}, "----x"},
			)
		}
		cases = append(cases, matrixCase{m + " /v1/client/metadata", m, "/v1/client/metadata", map[string]any{"NodeID": nobody, "Meta": map[string]string{"a": "b"}}, "----4"})
	}
	cases = append(cases,
		matrixCase{"GET /v1/client/stats", "GET", "/v1/client/stats?node_id=" + nobody, nil, "---44"},
		matrixCase{"GET /v1/client/metadata", "GET", "/v1/client/metadata?node_id=" + nobody, nil, "---44"},
	)
	return cases
}
