package job

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestScalingPolicyCommands(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	target := map[string]string{"Namespace": "default", "Job": "shop", "Group": "web"}
	f.JSON("GET /v1/scaling/policies", []map[string]any{
		{"ID": "44bf04cf-6093-8f8e-b87e-3df40a196f89", "Enabled": true, "Type": "horizontal", "Target": target},
	})
	f.JSON("GET /v1/scaling/policy/44bf04cf-6093-8f8e-b87e-3df40a196f89", map[string]any{
		"ID": "44bf04cf-6093-8f8e-b87e-3df40a196f89", "Enabled": false, "Type": "horizontal", "Target": target,
		"Min": 2, "Max": 6, "Policy": map[string]any{"cooldown": "1m"},
	})
	f.Fail("GET /v1/scaling/policy/nope", http.StatusNotFound, `scaling policy "nope" not found in namespace "default"`)

	r := f.Run(t, "", "scaling", "policy", "list", "-job", "shop", "-type", "horizontal")
	clitest.WantCode(t, r, 0)
	want := "ID                                    Enabled  Type        Target\n" +
		"44bf04cf-6093-8f8e-b87e-3df40a196f89  true     horizontal  Group:web,Job:shop,Namespace:default\n"
	if r.Out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.Out, want)
	}
	if got := f.Request("GET /v1/scaling/policies").Query; !strings.Contains(got, "job=shop") || !strings.Contains(got, "type=horizontal") {
		t.Errorf("list asked %q, want the job and type filters", got)
	}
	r = f.Run(t, "", "scaling", "policy", "list", "-json")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list -json", r.Out, `"Type": "horizontal"`)

	r = f.Run(t, "", "scaling", "policy", "info", "44bf04cf-6093-8f8e-b87e-3df40a196f89")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info", r.Out, "ID      = 44bf04cf-6093-8f8e-b87e-3df40a196f89", "Enabled = false",
		"Target  = Group:web,Job:shop,Namespace:default", "Min     = 2", "Max     = 6", "Policy:\n{\n  \"cooldown\": \"1m\"\n}")
	r = f.Run(t, "", "scaling", "policy", "info", "nope")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "info nope", r.ErrOut, "not found")
	r = f.Run(t, "", "scaling", "policy", "info")
	clitest.WantCode(t, r, 1)
}
