package acl

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestACLBootstrap(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	token := map[string]any{"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", "SecretID": "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11",
		"Name": "Bootstrap Token", "Type": "management", "Global": true, "CreateTime": clitest.TestNow.Format(time.RFC3339Nano),
		"CreateIndex": 7, "ModifyIndex": 7}
	f.JSON("PUT /v1/acl/bootstrap", token)

	r := f.Run(t, "", "acl", "bootstrap")
	clitest.WantCode(t, r, 0)
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
	if r.Out != want {
		t.Errorf("bootstrap printed:\n%s\nwant:\n%s", r.Out, want)
	}
	if body := f.Request("PUT /v1/acl/bootstrap").Body; len(body) != 0 {
		t.Errorf("bootstrap without a secret sent a body: %s", body)
	}

	r = f.Run(t, "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11\n", "acl", "bootstrap", "-json", "-")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "-json", r.Out, `"SecretID": "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11"`, `"Type": "management"`)
	clitest.WantContains(t, "request body", string(f.Request("PUT /v1/acl/bootstrap").Body), `"BootstrapSecret":"0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11"`)

	count := func() int { f.Mu.Lock(); defer f.Mu.Unlock(); return len(f.Reqs) }
	before := count()
	r = f.Run(t, "hunter2\n", "acl", "bootstrap", "-")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "must be a UUID")
	if strings.Contains(r.ErrOut, "hunter2") {
		t.Error("the refused secret was echoed")
	}
	if count() != before {
		t.Error("a refused secret reached the agent")
	}
}

func TestACLBootstrapRefused(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.Fail("PUT /v1/acl/bootstrap", http.StatusBadRequest, "ACL bootstrap already done (reset index: 12)")
	r := f.Run(t, "", "acl", "bootstrap")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Error bootstrapping", "reset index: 12")
}
