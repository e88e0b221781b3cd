package command

import (
	"bytes"

	"net/http"
	"strings"
	"testing"
	"time"
)

func TestUICommand(t *testing.T) {
	f := newFakeAgent(t)
	f.json("PUT /v1/acl/token/onetime", map[string]any{"OneTimeToken": map[string]any{
		"OneTimeSecretID": "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11", "AccessorID": "acc",
		"ExpiresAt": testNow.Add(10 * time.Minute).Format(time.RFC3339)}})
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		openErr error
		code    int
		out     string
		opened  string
		errOut  string
	}{
		{name: "show url", args: []string{"-show-url"}, out: "URL for web UI: " + f.srv.URL + "/ui/\n"},
		{name: "opens browser", args: nil, opened: f.srv.URL + "/ui/", out: "Opening URL"},
		{name: "no browser prints", args: nil, openErr: errNoBrowser, out: "URL for web UI: " + f.srv.URL + "/ui/\n"},
		{name: "namespace kept", env: map[string]string{"NOMAD_NAMESPACE": "prod"}, args: []string{"-show-url"},
			out: "URL for web UI: " + f.srv.URL + "/ui/?namespace=prod\n"},
		{name: "authenticate", env: map[string]string{"DROVER_TOKEN": "s3cret"}, args: []string{"-authenticate", "-show-url"},
			out: "URL for web UI: " + f.srv.URL + "/ui/?ott=0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11\n"},
		{name: "authenticate without token", args: []string{"-authenticate"}, code: 1, errOut: "needs an ACL token"},
		{name: "arguments refused", args: []string{"web"}, code: 1, errOut: "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"DROVER_ADDR": f.srv.URL}
			for k, v := range tt.env {
				env[k] = v
			}
			var out, errOut bytes.Buffer
			var opened string
			ui := &UI{Out: &out, Err: &errOut, In: strings.NewReader(""), Getenv: func(k string) string { return env[k] },
				Now: func() time.Time { return testNow },
				OpenURL: func(u string) error {
					if tt.openErr != nil {
						return tt.openErr
					}
					opened = u
					return nil
				}}
			code := RunUI(ui, append([]string{"ui"}, tt.args...), nil)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.code, out.String(), errOut.String())
			}
			if tt.out != "" && !strings.Contains(out.String(), tt.out) {
				t.Errorf("out %q lacks %q", out.String(), tt.out)
			}
			if tt.errOut != "" && !strings.Contains(errOut.String(), tt.errOut) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tt.errOut)
			}
			if opened != tt.opened {
				t.Errorf("opened %q, want %q", opened, tt.opened)
			}
		})
	}
	if got := f.request("PUT /v1/acl/token/onetime").Token; got != "s3cret" {
		t.Errorf("one-time token asked with token %q, want the caller's", got)
	}
}

func TestUICommandOneTimeTokenRefused(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("PUT /v1/acl/token/onetime", http.StatusForbidden, "Permission denied")
	r := runCLI(t, map[string]string{"DROVER_ADDR": f.srv.URL, "NOMAD_TOKEN": "bad"}, "", nil, "ui", "-authenticate")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.errOut, "Error creating a one-time token", "Permission denied")
	if strings.Contains(r.out, "ott=") {
		t.Errorf("printed an address without a token: %s", r.out)
	}
}
