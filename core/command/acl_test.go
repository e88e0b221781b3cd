package command

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestACLBootstrap(t *testing.T) {
	f := newFakeAgent(t)
	token := map[string]any{"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", "SecretID": "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11",
		"Name": "Bootstrap Token", "Type": "management", "Global": true, "CreateTime": testNow.Format(time.RFC3339Nano),
		"CreateIndex": 7, "ModifyIndex": 7}
	f.json("PUT /v1/acl/bootstrap", token)

	r := f.run(t, "", "acl", "bootstrap")
	wantCode(t, r, 0)
	want := strings.Join([]string{
		"Accessor ID  = 5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b",
		"Secret ID    = 0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11",
		"Name         = Bootstrap Token",
		"Type         = management",
		"Global       = true",
		"Create Time  = 2026-05-01T12:00:00Z",
		"Expiry Time  = <none>",
		"Create Index = 7",
		"Modify Index = 7",
		"Policies     = n/a",
	}, "\n") + "\n"
	if r.out != want {
		t.Errorf("bootstrap printed:\n%s\nwant:\n%s", r.out, want)
	}
	if body := f.request("PUT /v1/acl/bootstrap").Body; len(body) != 0 {
		t.Errorf("bootstrap without a secret sent a body: %s", body)
	}

	r = f.run(t, "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11\n", "acl", "bootstrap", "-json", "-")
	wantCode(t, r, 0)
	wantContains(t, "-json", r.out, `"SecretID": "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11"`, `"Type": "management"`)
	wantContains(t, "request body", string(f.request("PUT /v1/acl/bootstrap").Body), `"BootstrapSecret":"0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11"`)

	count := func() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.reqs) }
	before := count()
	r = f.run(t, "hunter2\n", "acl", "bootstrap", "-")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.errOut, "must be a UUID")
	if strings.Contains(r.errOut, "hunter2") {
		t.Error("the refused secret was echoed")
	}
	if count() != before {
		t.Error("a refused secret reached the agent")
	}
}

func TestACLBootstrapRefused(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("PUT /v1/acl/bootstrap", http.StatusBadRequest, "ACL bootstrap already done (reset index: 12)")
	r := f.run(t, "", "acl", "bootstrap")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.errOut, "Error bootstrapping", "reset index: 12")
}
