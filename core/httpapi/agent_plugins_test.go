package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

type fakePlugins struct {
	list     []structs.AgentPlugin
	reloaded []string
}

func (f *fakePlugins) List() []structs.AgentPlugin { return f.list }

func (f *fakePlugins) Get(name string) (structs.AgentPlugin, error) {
	for _, p := range f.list {
		if p.Name == name {
			return p, nil
		}
	}
	return structs.AgentPlugin{}, structs.NewError(structs.ErrNotFound, "unknown plugin %q", name)
}

func (f *fakePlugins) Reload(_ context.Context, name string) error {
	if _, err := f.Get(name); err != nil {
		return err
	}
	f.reloaded = append(f.reloaded, name)
	return nil
}

func TestAgentPluginEndpoints(t *testing.T) {
	plugins := &fakePlugins{list: []structs.AgentPlugin{
		{Name: "scheduler-system", Kind: "scheduler", Builtin: true, PID: 10, Health: structs.AgentPluginHealthy,
			JobTypes: []structs.AgentJobType{{Name: "system", Behavior: structs.JobTypeBehavior{PerNode: true}}}},
		{Name: "gpu", Kind: "scheduler", Path: "/p/gpu", Health: structs.AgentPluginRestarting},
	}}
	wholeReloads := 0
	api, _ := newTestAPI(t, Config{Plugins: plugins, ReloadPlugins: func(context.Context) (PluginsReload, error) {
		wholeReloads++
		return PluginsReload{Added: []string{"gpu"}}, nil
	}})
	h := api.Handler()
	for _, tc := range []struct {
		method, target string
		code           int
		body           []string
	}{
		{http.MethodGet, "/v1/agent/plugins", http.StatusOK, []string{`{"Plugins":[{"Name":"scheduler-system"`, `"JobTypes":[{"Name":"system","Behavior":{`, `"PerNode":true`, `"Name":"gpu"`, `"Path":"/p/gpu"`}},
		{http.MethodGet, "/v1/agent/plugins/gpu", http.StatusOK, []string{`"Name":"gpu"`, `"Health":"restarting"`}},
		{http.MethodGet, "/v1/agent/plugin?name=scheduler-system", http.StatusOK, []string{`"PID":10`}},
		{http.MethodGet, "/v1/agent/plugins/ghost", http.StatusNotFound, []string{`unknown plugin "ghost"`}},
		{http.MethodGet, "/v1/agent/plugin?name=ghost", http.StatusNotFound, []string{`unknown plugin "ghost"`}},
		{http.MethodGet, "/v1/agent/plugin", http.StatusBadRequest, []string{"name"}},
		{http.MethodPut, "/v1/agent/plugins/reload?name=gpu", http.StatusOK, []string{`"Reloaded":true`, `"Plugin":{"Name":"gpu"`}},
		{http.MethodPut, "/v1/agent/plugins/reload?name=ghost", http.StatusNotFound, []string{`unknown plugin "ghost"`}},
		{http.MethodPut, "/v1/agent/plugins/reload?name=", http.StatusBadRequest, []string{"name"}},
		{http.MethodGet, "/v1/agent/plugins/reload", http.StatusMethodNotAllowed, nil},
		{http.MethodPut, "/v1/agent/plugins/reload", http.StatusOK, []string{`"Reloaded":true`, `"Added":["gpu"]`}},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			rec := do(t, h, tc.method, tc.target, "")
			if rec.Code != tc.code {
				t.Fatalf("HTTP %d %s, want %d", rec.Code, rec.Body, tc.code)
			}
			for _, want := range tc.body {
				if !strings.Contains(rec.Body.String(), want) {
					t.Errorf("body %s lacks %s", rec.Body, want)
				}
			}
		})
	}
	if strings.Join(plugins.reloaded, ",") != "gpu" || wholeReloads != 1 {
		t.Errorf("reloaded %v and %d whole reloads; want gpu once, one whole reload", plugins.reloaded, wholeReloads)
	}
	var resp AgentPluginsResponse
	if err := json.Unmarshal(do(t, h, http.MethodGet, "/v1/agent/plugins", "").Body.Bytes(), &resp); err != nil || len(resp.Plugins) != 2 {
		t.Errorf("decoded %+v, %v", resp, err)
	}
	none, _ := newTestAPI(t, Config{})
	if rec := do(t, none.Handler(), http.MethodGet, "/v1/agent/plugins", ""); rec.Code != http.StatusNotImplemented {
		t.Errorf("no plugins: HTTP %d", rec.Code)
	}
}
