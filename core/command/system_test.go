package command

import (
	"net/http"
	"strings"
	"testing"
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
			f := newFakeAgent(t)
			f.fail("PUT /v1/system/gc", tc.status, tc.msg)
			r := f.run(t, "", append([]string{"system", "gc"}, tc.args...)...)
			wantCode(t, r, tc.code)
			if r.out != "" {
				t.Errorf("stdout %q, want nothing", r.out)
			}
			if tc.wantErr == "" && r.errOut != "" {
				t.Errorf("stderr %q, want nothing", r.errOut)
			}
			wantContains(t, "stderr", r.errOut, tc.wantErr)
			if tc.status == 0 {
				return
			}
			req := f.request("PUT /v1/system/gc")
			if strings.TrimSpace(string(req.Body)) != "{}" {
				t.Errorf("body %q, want {} as Nomad's client sends", req.Body)
			}
			if tc.name == "denied" && req.Token != "s3cret" {
				t.Errorf("token %q, want the -token flag's", req.Token)
			}
		})
	}
}
