package command

import (
	"net/http"
	"strings"
	"testing"
)

func TestServiceCommands(t *testing.T) {
	f := newFakeAgent(t)
	f.json("GET /v1/services", []map[string]any{{"Namespace": "default", "Services": []map[string]any{
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
	f.json("GET /v1/service/web", regs)
	f.json("GET /v1/service/none", []any{})
	f.json("DELETE /v1/service/web/_nomad-task-x", map[string]any{"Index": 12})
	f.fail("DELETE /v1/service/web/gone", http.StatusNotFound, `service registration "gone" of service "web" not found`)

	r := f.run(t, "", "service", "list")
	wantCode(t, r, 0)
	if want := "Service Name  Tags\napi           []\nweb           [a,b]\n"; r.out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.out, want)
	}
	r = f.run(t, "", "service", "list", "-namespace", "*")
	wantCode(t, r, 0)
	wantContains(t, "list *", r.out, "Service Name  Namespace  Tags", "web           default    [a,b]")
	if got := f.request("GET /v1/services").Query; !strings.Contains(got, "namespace=%2A") {
		t.Errorf("list -namespace * asked %q", got)
	}

	r = f.run(t, "", "service", "info", "web")
	wantCode(t, r, 0)
	want := "Job ID  Address          Tags   Node ID   Alloc ID\nshop    10.0.0.9:21000   [a,b]  11112222  0a1b2c3d\nshop    [fd00::1]:21001  []     55556666  88889999\n"
	if r.out != want {
		t.Errorf("info:\n%s\nwant:\n%s", r.out, want)
	}
	r = f.run(t, "", "service", "info", "-verbose", "web")
	wantCode(t, r, 0)
	wantContains(t, "info -verbose", r.out, "ID           = _nomad-task-0a1b2c3d-9999-g-web-http", "Alloc ID     = 0a1b2c3d-4444",
		"Address      = 10.0.0.9:21000", "Modify Index = 9", "Checks\nCheck  Status   Output\nalive  success  HTTP 200")
	r = f.run(t, "", "service", "info", "-json", "web")
	wantCode(t, r, 0)
	wantContains(t, "info -json", r.out, `"ServiceName": "web"`, `"Port": 21000`)
	r = f.run(t, "", "service", "info", "none")
	wantCode(t, r, 1)
	wantContains(t, "info none", r.errOut, `No service registrations found for "none"`)

	r = f.run(t, "", "service", "delete", "web", "_nomad-task-x")
	wantCode(t, r, 0)
	wantContains(t, "delete", r.out, "Successfully deleted service registration")
	r = f.run(t, "", "service", "delete", "web", "gone")
	wantCode(t, r, 1)
	wantContains(t, "delete gone", r.errOut, "not found")
	r = f.run(t, "", "service", "delete", "web")
	wantCode(t, r, 1)
	wantContains(t, "delete usage", r.errOut, "two arguments")
}
