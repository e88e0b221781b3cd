package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
	"github.com/drover-org/drover/sdk/shared"
)

// testPlugins are plugins only the test binary serves (`<exe> __plugin
// <name>` with testPluginEnv set), besides the built-in catalog.
var testPlugins = map[string]func(){
	"test-gc-node": func() {
		sdkgc.Serve(fakeGC{name: "fake-gc-node", collections: []gcpb.Collection{gcpb.Collection_COLLECTION_NODE}})
	},
	"test-gc-job": func() {
		sdkgc.Serve(fakeGC{name: "fake-gc-job", collections: []gcpb.Collection{gcpb.Collection_COLLECTION_JOB}})
	},
}

// fakeGC decides the collections it lists and keeps everything. Its Info
// reports its pid as its version, so a test can tell which process
// answered.
type fakeGC struct {
	name        string
	collections []gcpb.Collection
}

func (f fakeGC) Info(context.Context) (*gcpb.InfoResponse, error) {
	return &gcpb.InfoResponse{Name: f.name, Version: strconv.Itoa(os.Getpid()), Collections: f.collections}, nil
}

func (fakeGC) Decide(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	return &gcpb.DecideResponse{}, nil
}

// installTestPlugin writes dir/name, a script that runs the test binary as
// the test plugin serve, by write and rename so a launch never sees a
// half-written file.
func installTestPlugin(t *testing.T, dir, name, serve string) {
	t.Helper()
	body := fmt.Sprintf("#!/bin/sh\nGORACE=atexit_sleep_ms=0 %s=1 exec %q %s %s\n", testPluginEnv, os.Args[0], pluginhost.ServeCommand, serve)
	tmp := filepath.Join(dir, ".next-"+name)
	if err := os.WriteFile(tmp, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// newGCHost runs the agent's plugin kinds with the built-in gc plugin
// (unless builtin is false) and whatever dir holds. A crashed plugin stays
// down: the test sees the outage.
func newGCHost(t *testing.T, dir string, builtin bool) *pluginhost.Host {
	t.Helper()
	cfg := pluginhost.Config{
		Logger:    hclog.New(&hclog.LoggerOptions{Name: "plugins", Output: t.Output(), Level: hclog.Warn}),
		SelfExe:   os.Args[0],
		PluginDir: dir,
		Backoff:   pluginhost.Backoff{Initial: time.Hour},
	}
	if builtin {
		cfg.Builtins = []pluginhost.Builtin{{Name: "gc", Kind: shared.KindGC, Env: []string{testPluginEnv + "=1", "GORACE=atexit_sleep_ms=0"}}}
	}
	h, err := pluginhost.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("pluginhost.New: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// decider names the plugin deciding c through r and the pid that answered
// its Info, or the error.
func decider(t *testing.T, r interface {
	Collector(gcpb.Collection) (sdkgc.Collector, error)
}, c gcpb.Collection) (string, error) {
	t.Helper()
	col, err := r.Collector(c)
	if err != nil {
		return "", err
	}
	return collectorName(t, col), nil
}

func collectorName(t *testing.T, col sdkgc.Collector) string {
	t.Helper()
	info, err := col.Info(t.Context())
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	return info.GetName()
}

func TestGCRouterRoutesCollections(t *testing.T) {
	dir := t.TempDir()
	installTestPlugin(t, dir, "ext-gc", "test-gc-node")
	h := newGCHost(t, dir, true)
	r := GCRouter(h)

	for _, tc := range []struct {
		collection gcpb.Collection
		want       string
	}{
		{gcpb.Collection_COLLECTION_EVAL, "gc"},
		{gcpb.Collection_COLLECTION_JOB, "gc"},
		{gcpb.Collection_COLLECTION_NODE, "fake-gc-node"}, // plugin_dir overrides the built-in
		{gcpb.Collection_COLLECTION_DEPLOYMENT, "gc"},
		{gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM, "gc"},
		{gcpb.Collection_COLLECTION_CSI_PLUGIN, "gc"},
		{gcpb.Collection_COLLECTION_ONE_TIME_TOKEN, "gc"},
		{gcpb.Collection_COLLECTION_ACL_TOKEN, "gc"},
	} {
		t.Run(tc.collection.String(), func(t *testing.T) {
			got, err := decider(t, r, tc.collection)
			if err != nil || got != tc.want {
				t.Errorf("Collector(%s) = %q, %v; want %q", tc.collection, got, err, tc.want)
			}
		})
	}
	if _, err := r.Collector(gcpb.Collection_COLLECTION_UNSPECIFIED); !errors.Is(err, structs.ErrUnavailable) ||
		!strings.Contains(err.Error(), "loaded: gc, ext-gc") {
		t.Errorf("Collector(unspecified) error = %v, want ErrUnavailable listing the gc plugins", err)
	}
	// Only gc plugins route: the other kinds' discovery did not pick up
	// the gc plugin, nor the gc kind a non-gc one.
	if got := h.Plugins(shared.KindGC); strings.Join(got, ",") != "gc,ext-gc" {
		t.Errorf("gc plugins = %v", got)
	}
	if got := h.Plugins(shared.KindScheduler); len(got) != 0 {
		t.Errorf("scheduler plugins = %v, want none", got)
	}
}

// A reload of a gc plugin reaches the handles given out before it, and a
// new Info re-routes the collections; a plugin that is down is
// unavailable, not replaced by another one.
func TestGCRouterReloadAndOutage(t *testing.T) {
	dir := t.TempDir()
	installTestPlugin(t, dir, "ext-gc", "test-gc-node")
	h := newGCHost(t, dir, true)
	r := GCRouter(h)

	node, err := r.Collector(gcpb.Collection_COLLECTION_NODE)
	if err != nil {
		t.Fatal(err)
	}
	before := h.Plugins(shared.KindGC)
	oldPid := pidOf(t, h, "ext-gc")

	installTestPlugin(t, dir, "ext-gc", "test-gc-job")
	if err := h.ReloadPlugin(t.Context(), "ext-gc"); err != nil {
		t.Fatalf("ReloadPlugin: %v", err)
	}
	newPid := pidOf(t, h, "ext-gc")
	if newPid == oldPid {
		t.Fatalf("ext-gc pid %d unchanged by the reload", newPid)
	}
	// The handle held across the reload calls the new process.
	info, err := node.Info(t.Context())
	if err != nil || info.GetVersion() != strconv.Itoa(newPid) {
		t.Errorf("old handle's Info = %v, %v; want the new process %d", info, err, newPid)
	}
	for _, tc := range []struct {
		collection gcpb.Collection
		want       string
	}{
		{gcpb.Collection_COLLECTION_NODE, "gc"}, // back to the built-in
		{gcpb.Collection_COLLECTION_JOB, "fake-gc-job"},
		{gcpb.Collection_COLLECTION_EVAL, "gc"},
	} {
		if got, err := decider(t, r, tc.collection); err != nil || got != tc.want {
			t.Errorf("after reload: Collector(%s) = %q, %v; want %q", tc.collection, got, err, tc.want)
		}
	}
	if after := h.Plugins(shared.KindGC); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("gc plugins %v became %v", before, after)
	}

	// ext-gc dies and stays down (backoff of an hour).
	if err := syscall.Kill(newPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitForCond(func() bool { return !h.Running("ext-gc") }); err != nil {
		t.Fatal("ext-gc never reported down")
	}
	if _, err := r.Collector(gcpb.Collection_COLLECTION_JOB); !errors.Is(err, structs.ErrUnavailable) ||
		!errors.Is(err, pluginhost.ErrPluginUnavailable) || !strings.Contains(err.Error(), `"ext-gc"`) {
		t.Errorf("Collector(job) while ext-gc is down: %v; want ErrUnavailable naming ext-gc", err)
	}
	if got, err := decider(t, r, gcpb.Collection_COLLECTION_EVAL); err != nil || got != "gc" {
		t.Errorf("Collector(eval) while ext-gc is down = %q, %v; want the built-in", got, err)
	}
	if err := h.ReloadPlugin(t.Context(), "ext-gc"); err != nil {
		t.Fatalf("ReloadPlugin after the crash: %v", err)
	}
	if got, err := decider(t, r, gcpb.Collection_COLLECTION_JOB); err != nil || got != "fake-gc-job" {
		t.Errorf("Collector(job) after the revival = %q, %v", got, err)
	}
}

func TestGCRouterWithoutPlugin(t *testing.T) {
	h := newGCHost(t, "", false)
	_, err := GCRouter(h).Collector(gcpb.Collection_COLLECTION_EVAL)
	if !errors.Is(err, structs.ErrUnavailable) || !strings.Contains(err.Error(), "none is loaded") {
		t.Errorf("Collector with no gc plugin: %v; want ErrUnavailable saying none is loaded", err)
	}
}

// The dev agent loads the built-in gc plugin, and a reload of it through
// the HTTP API swaps the process the router reaches.
func TestAgentGCPluginReload(t *testing.T) {
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	cfg.Client.Enabled = false
	a := startTestAgent(t, cfg, hclog.Warn)
	r := GCRouter(a.Plugins())
	col, err := r.Collector(gcpb.Collection_COLLECTION_JOB)
	if err != nil {
		t.Fatal(err)
	}
	if name := collectorName(t, col); name != "gc" {
		t.Fatalf("job GC decided by %q, want the built-in gc", name)
	}
	old := pidOf(t, a.Plugins(), "gc")
	if code, body := httpDo(t, a, http.MethodPut, "/v1/agent/plugins/reload?name=gc"); code != http.StatusOK {
		t.Fatalf("reload gc: HTTP %d %s", code, body)
	}
	if now := pidOf(t, a.Plugins(), "gc"); now == old {
		t.Fatalf("gc pid %d unchanged by the reload", now)
	}
	if name := collectorName(t, col); name != "gc" {
		t.Errorf("after the reload job GC is decided by %q", name)
	}
	st, err := a.PluginStatus("gc")
	if err != nil || st.Kind != shared.KindGC || !st.Builtin || st.Restarts != 1 || st.Health != structs.AgentPluginHealthy {
		t.Errorf("gc status = %+v, %v", st, err)
	}
}

func pidOf(t *testing.T, h *pluginhost.Host, name string) int {
	t.Helper()
	st, err := h.PluginStatus(name)
	if err != nil || st.Pid == 0 {
		t.Fatalf("plugin %s: %+v, %v", name, st, err)
	}
	return st.Pid
}

// waitForCond polls cond until it holds or testTimeout passes.
func waitForCond(cond func() bool) error {
	deadline := time.After(testTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			return errors.New("condition not met before the deadline")
		case <-tick.C:
		}
	}
	return nil
}
