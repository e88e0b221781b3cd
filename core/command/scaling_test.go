package command

import (
	"net/http"
	"strings"
	"testing"
)

func TestScalingPolicyCommands(t *testing.T) {
	f := newFakeAgent(t)
	target := map[string]string{"Namespace": "default", "Job": "shop", "Group": "web"}
	f.json("GET /v1/scaling/policies", []map[string]any{
		{"ID": "44bf04cf-6093-8f8e-b87e-3df40a196f89", "Enabled": true, "Type": "horizontal", "Target": target},
	})
	f.json("GET /v1/scaling/policy/44bf04cf-6093-8f8e-b87e-3df40a196f89", map[string]any{
		"ID": "44bf04cf-6093-8f8e-b87e-3df40a196f89", "Enabled": false, "Type": "horizontal", "Target": target,
		"Min": 2, "Max": 6, "Policy": map[string]any{"cooldown": "1m"},
	})
	f.fail("GET /v1/scaling/policy/nope", http.StatusNotFound, `scaling policy "nope" not found in namespace "default"`)

	r := f.run(t, "", "scaling", "policy", "list", "-job", "shop", "-type", "horizontal")
	wantCode(t, r, 0)
	want := "ID                                    Enabled  Type        Target\n" +
		"44bf04cf-6093-8f8e-b87e-3df40a196f89  true     horizontal  Group:web,Job:shop,Namespace:default\n"
	if r.out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.out, want)
	}
	if got := f.request("GET /v1/scaling/policies").Query; !strings.Contains(got, "job=shop") || !strings.Contains(got, "type=horizontal") {
		t.Errorf("list asked %q, want the job and type filters", got)
	}
	r = f.run(t, "", "scaling", "policy", "list", "-json")
	wantCode(t, r, 0)
	wantContains(t, "list -json", r.out, `"Type": "horizontal"`)

	r = f.run(t, "", "scaling", "policy", "info", "44bf04cf-6093-8f8e-b87e-3df40a196f89")
	wantCode(t, r, 0)
	wantContains(t, "info", r.out, "ID      = 44bf04cf-6093-8f8e-b87e-3df40a196f89", "Enabled = false",
		"Target  = Group:web,Job:shop,Namespace:default", "Min     = 2", "Max     = 6", "Policy:\n{\n  \"cooldown\": \"1m\"\n}")
	r = f.run(t, "", "scaling", "policy", "info", "nope")
	wantCode(t, r, 1)
	wantContains(t, "info nope", r.errOut, "not found")
	r = f.run(t, "", "scaling", "policy", "info")
	wantCode(t, r, 1)
}
