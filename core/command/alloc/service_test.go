package alloc

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestServiceCommands(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/services", []map[string]any{{"Namespace": "default", "Services": []map[string]any{
		{"ServiceName": "api", "Tags": []string{}}, {"ServiceName": "web", "Tags": []string{"a", "b"}}}}})
	regs := []map[string]any{{
		"ID": "_nomad-task-0a1b2c3d-9999-g-web-http", "ServiceName": "web", "Namespace": "default", "NodeID": "11112222-3333",
		"Datacenter": "dc1", "JobID": "shop", "AllocID": "0a1b2c3d-4444", "Tags": []string{"a", "b"}, "Address": "10.0.0.9",
		"Port": 21000, "CreateIndex": 7, "ModifyIndex": 9,
		"Checks": []map[string]any{{"Check": "alive", "Status": "success", "Output": "HTTP 200"}},
	}, {
		"ID": "_nomad-task-x", "ServiceName": "web", "Namespace": "default", "NodeID": "55556666-7777",
		"JobID": "shop", "AllocID": "88889999-aaaa", "Address": "fd00::1", "Port": 21001,
	}}
	f.JSON("GET /v1/service/web", regs)
	f.JSON("GET /v1/service/none", []any{})
	f.JSON("DELETE /v1/service/web/_nomad-task-x", map[string]any{"Index": 12})
	f.Fail("DELETE /v1/service/web/gone", http.StatusNotFound, `service registration "gone" of service "web" not found`)

	r := f.Run(t, "", "service", "list")
	clitest.WantCode(t, r, 0)
	if want := "Service Name  Tags\napi           []\nweb           [a,b]\n"; r.Out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.Out, want)
	}
	r = f.Run(t, "", "service", "list", "-namespace", "*")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list *", r.Out, "Service Name  Namespace  Tags", "web           default    [a,b]")
	if got := f.Request("GET /v1/services").Query; !strings.Contains(got, "namespace=%2A") {
		t.Errorf("list -namespace * asked %q", got)
	}

	r = f.Run(t, "", "service", "info", "web")
	clitest.WantCode(t, r, 0)
	want := "Job ID  Address          Tags   Node ID   Alloc ID\nshop    10.0.0.9:21000   [a,b]  11112222  0a1b2c3d\nshop    [fd00::1]:21001  []     55556666  88889999\n"
	if r.Out != want {
		t.Errorf("info:\n%s\nwant:\n%s", r.Out, want)
	}
	r = f.Run(t, "", "service", "info", "-verbose", "web")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info -verbose", r.Out, "ID           = _nomad-task-0a1b2c3d-9999-g-web-http", "Alloc ID     = 0a1b2c3d-4444",
		"Address      = 10.0.0.9:21000", "Modify Index = 9", "Checks\nCheck  Status   Output\nalive  success  HTTP 200")
	r = f.Run(t, "", "service", "info", "-json", "web")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info -json", r.Out, `"ServiceName": "web"`, `"Port": 21000`)
	r = f.Run(t, "", "service", "info", "none")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "info none", r.ErrOut, `No service registrations found for "none"`)

	r = f.Run(t, "", "service", "delete", "web", "_nomad-task-x")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "delete", r.Out, "Successfully deleted service registration")
	r = f.Run(t, "", "service", "delete", "web", "gone")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "delete gone", r.ErrOut, "not found")
	r = f.Run(t, "", "service", "delete", "web")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "delete usage", r.ErrOut, "two arguments")
}
