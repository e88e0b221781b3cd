package httpapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestAgentReloadPlugins(t *testing.T) {
	calls := 0
	var fail error
	api, _ := newTestAPI(t, Config{ReloadPlugins: func(context.Context) (PluginsReload, error) { calls++; return PluginsReload{}, fail }})
	if rec := do(t, api.Handler(), http.MethodPut, "/v1/agent/plugins/reload", ""); rec.Code != http.StatusOK || calls != 1 {
		t.Fatalf("reload: %d %s (calls %d)", rec.Code, rec.Body, calls)
	}
	fail = structs.NewError(structs.ErrUnavailable, "plugin scheduler-system: new binary failed its handshake")
	rec := do(t, api.Handler(), http.MethodPost, "/v1/agent/plugins/reload", "")
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != fail.Error() {
		t.Fatalf("failed reload: %d %q", rec.Code, rec.Body)
	}
	if rec := do(t, api.Handler(), http.MethodGet, "/v1/agent/plugins/reload", ""); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET reload: %d", rec.Code)
	}
	none, _ := newTestAPI(t, Config{})
	if rec := do(t, none.Handler(), http.MethodPut, "/v1/agent/plugins/reload", ""); rec.Code != http.StatusNotImplemented {
		t.Fatalf("no reloader: %d", rec.Code)
	}
}
