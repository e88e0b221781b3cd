package operator

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestSystemGC(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		status  int // the agent's answer; 0: not asked
		msg     string
		code    int
		wantErr string
	}{
		{"ok", nil, http.StatusOK, "", 0, ""},
		{"unavailable", nil, http.StatusServiceUnavailable, "no gc plugin decides collection COLLECTION_EVAL (none is loaded)", 1,
			"Error running system garbage collection: Unexpected response code: 503 (no gc plugin decides collection COLLECTION_EVAL (none is loaded))"},
		{"denied", []string{"-token", "s3cret"}, http.StatusForbidden, "Permission denied", 1, "Permission denied"},
		{"no leader", nil, http.StatusInternalServerError, "No cluster leader", 1, "No cluster leader"},
		{"argument", []string{"now"}, 0, "", 1, "This command takes no arguments"},
		{"bad flag", []string{"-force"}, 0, "", 1, "flag provided but not defined: -force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.Fail("PUT /v1/system/gc", tc.status, tc.msg)
			r := f.Run(t, "", append([]string{"system", "gc"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			if r.Out != "" {
				t.Errorf("stdout %q, want nothing", r.Out)
			}
			if tc.wantErr == "" && r.ErrOut != "" {
				t.Errorf("stderr %q, want nothing", r.ErrOut)
			}
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
			if tc.status == 0 {
				return
			}
			req := f.Request("PUT /v1/system/gc")
			if strings.TrimSpace(string(req.Body)) != "{}" {
				t.Errorf("body %q, want {} as Nomad's client sends", req.Body)
			}
			if tc.name == "denied" && req.Token != "s3cret" {
				t.Errorf("token %q, want the -token flag's", req.Token)
			}
		})
	}
}
