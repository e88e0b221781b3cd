package command

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/hashicorp/go-hclog"
)

const testOTT = "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11"

func TestUICommand(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/acl/token/onetime", map[string]any{"OneTimeToken": map[string]any{
		"OneTimeSecretID": testOTT, "AccessorID": "acc",
		"ExpiresAt": clitest.TestNow.Add(10 * time.Minute).Format(time.RFC3339)}})
	jobs := []*structs.JobListStub{{ID: "web", Namespace: "default"}, {ID: "web/dispatch-1", Namespace: "default"}}
	f.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var out []*structs.JobListStub
		for _, j := range jobs {
			if strings.HasPrefix(j.ID, r.URL.Query().Get("prefix")) {
				out = append(out, j)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
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
		{name: "show url", args: []string{"-show-url"}, out: "URL for web UI: " + f.Srv.URL + "/ui/jobs\n"},
		{name: "opens browser", args: nil, opened: f.Srv.URL + "/ui/jobs", out: "Opening URL"},
		{name: "no browser prints", args: nil, openErr: errNoBrowser, out: "URL for web UI: " + f.Srv.URL + "/ui/jobs\n"},
		{name: "namespace kept", env: map[string]string{"NOMAD_NAMESPACE": "prod"}, args: []string{"-show-url"},
			out: "URL for web UI: " + f.Srv.URL + "/ui/jobs?namespace=prod\n"},
		{name: "job page", args: []string{"-show-url", "web"}, out: "URL for web UI: " + f.Srv.URL + "/ui/jobs/default/web\n"},
		{name: "child job page keeps its slash", args: []string{"-show-url", "web/dis"}, out: "URL for web UI: " + f.Srv.URL + "/ui/jobs/default/web/dispatch-1\n"},
		{name: "authenticate", env: map[string]string{"DROVER_TOKEN": "s3cret"}, args: []string{"-authenticate", "-show-url"},
			out: "URL for web UI: " + f.Srv.URL + "/ui/settings/tokens?ott=" + testOTT + "\n"},
		{name: "authenticate to a job", env: map[string]string{"DROVER_TOKEN": "s3cret"}, args: []string{"-authenticate", "-show-url", "web"},
			out: "URL for web UI: " + f.Srv.URL + "/ui/settings/tokens?next=%2Fui%2Fjobs%2Fdefault%2Fweb&ott=" + testOTT + "\n"},
		{name: "authenticate without token", args: []string{"-authenticate"}, code: 1, errOut: "needs an ACL token"},
		{name: "two arguments refused", args: []string{"web", "db"}, code: 1, errOut: "at most one argument"},
		{name: "unknown job", args: []string{"nosuch"}, code: 1, errOut: `No job(s) with prefix or id "nosuch"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"DROVER_ADDR": f.Srv.URL}
			for k, v := range tt.env {
				env[k] = v
			}
			var out, errOut bytes.Buffer
			var opened string
			ui := &cli.UI{Out: &out, Err: &errOut, In: strings.NewReader(""), Getenv: func(k string) string { return env[k] },
				Now: func() time.Time { return clitest.TestNow },
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
	if got := f.Request("PUT /v1/acl/token/onetime").Token; got != "s3cret" {
		t.Errorf("one-time token asked with token %q, want the caller's", got)
	}
}

func TestUICommandOneTimeTokenRefused(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.Fail("PUT /v1/acl/token/onetime", http.StatusForbidden, "Permission denied")
	r := clitest.RunCLI(t, map[string]string{"DROVER_ADDR": f.Srv.URL, "NOMAD_TOKEN": "bad"}, "", nil, "ui", "-authenticate")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Error creating a one-time token", "Permission denied")
	if strings.Contains(r.Out, "ott=") {
		t.Errorf("printed an address without a token: %s", r.Out)
	}
}

// testAgent is a real dev server with ACLs on behind the HTTP API (and so
// the UI), on a local port; its management token is returned.
func testAgent(t *testing.T) (addr, mgmt string) {
	t.Helper()
	srv, err := server.New(server.Config{Logger: hclog.NewNullLogger(), DevMode: true, ACLEnabled: true,
		Schedulers: builtin.InProcess{}, KnownDrivers: []string{"raw_exec"}, HeartbeatTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.WaitForLeader(ctx); err != nil {
		_ = srv.Shutdown()
		t.Fatal(err)
	}
	h := httpapi.New(httpapi.Config{Server: srv, Logger: hclog.NewNullLogger(),
		Jobs: srv.Jobs(), Nodes: srv.Nodes(), Deployments: srv.Deployments(), Operator: srv.Operator(), System: srv,
		Namespaces: srv.Namespaces(), NodePools: srv.NodePools(), Services: srv.Services(), CSI: srv.CSI(), JobTypes: srv,
		ACL: srv.ACL(), ACLCRUD: srv.ACL(), JoinTokens: srv.PKI(), Resolver: srv.ACL()})
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		ts.Close()
		_ = h.Shutdown(context.Background())
		_ = srv.Shutdown()
	})
	tok, _, err := srv.ACL().BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return ts.URL, tok.SecretID
}

// TestUIAuthenticateAgainstAgent: the address `drover ui -authenticate`
// prints signs a browser in once (the session cookie then reads a page
// that needs the token), and a second visit is refused in words.
func TestUIAuthenticateAgainstAgent(t *testing.T) {
	addr, mgmt := testAgent(t)
	r := clitest.RunCLI(t, map[string]string{"DROVER_ADDR": addr, "DROVER_TOKEN": mgmt}, "", nil, "ui", "-authenticate", "-show-url")
	clitest.WantCode(t, r, 0)
	_, link, ok := strings.Cut(strings.TrimSpace(r.Out), "URL for web UI: ")
	if !ok || !strings.HasPrefix(link, addr+"/ui/settings/tokens?ott=") {
		t.Fatalf("no sign-in address in %q", r.Out)
	}
	if strings.Contains(link, mgmt) {
		t.Fatal("the address holds the ACL token's secret itself")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string, cookies ...*http.Cookie) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	first, _ := get(link)
	if first.StatusCode != http.StatusSeeOther || first.Header.Get("Location") != "/ui/jobs" {
		t.Fatalf("first visit: %d to %q, want 303 to /ui/jobs", first.StatusCode, first.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range first.Cookies() {
		if c.Name == "drover_token" {
			session = c
		}
	}
	if session == nil || session.Value != mgmt || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || !session.Expires.IsZero() || session.MaxAge != 0 {
		t.Fatalf("session cookie %+v: want the exchanged token, HttpOnly, SameSite=Strict, no expiry", session)
	}
	servers, body := get(addr+"/ui/servers", session)
	if servers.StatusCode != http.StatusOK || !strings.Contains(body, "<strong>leader</strong>") {
		t.Fatalf("servers page with the session: %d\n%s", servers.StatusCode, body)
	}

	second, body := get(link)
	if second.StatusCode != http.StatusForbidden || !strings.Contains(body, "already used or has expired") {
		t.Fatalf("second visit: %d, want 403 saying the token was used\n%s", second.StatusCode, body)
	}
	if len(second.Cookies()) != 0 {
		t.Errorf("second visit set cookies %v", second.Cookies())
	}
	u, _ := url.Parse(link)
	if strings.Contains(body, u.Query().Get("ott")) {
		t.Error("the refusal echoes the one-time secret")
	}
}
