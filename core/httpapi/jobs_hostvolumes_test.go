package httpapi

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// hostVolJobBody is jobBody with a group host volume of source, read-only
// or not.
func hostVolJobBody(ns, source string, readOnly bool) map[string]any {
	b := jobBody(ns)
	tg := b["Job"].(map[string]any)["TaskGroups"].([]map[string]any)[0]
	tg["Volumes"] = map[string]any{"data": map[string]any{"Name": "data", "Type": "host", "Source": source, "ReadOnly": readOnly}}
	tg["Tasks"].([]map[string]any)[0]["VolumeMounts"] = []map[string]any{{"Volume": "data", "Destination": "/data", "ReadOnly": readOnly}}
	return b
}

// A job with a host volume also needs the host_volume rule of its
// source: a namespace write policy alone is refused (403), as in Nomad.
func hostVolumeMatrixCases() []matrixCase {
	return []matrixCase{
		{"POST /v1/jobs", "POST", "/v1/jobs", hostVolJobBody("team", "shared", false), "----2"},
		{"PUT /v1/jobs", "PUT", "/v1/jobs", hostVolJobBody("team", "shared", true), "----2"},
		{"/v1/job/", "PUT", "/v1/job/web", hostVolJobBody("team", "shared", false), "----2"},
	}
}

// TestHostVolumeACL: the host_volume rules decide which host volumes a
// token's jobs may mount: policy "read" a read-only request only, "write"
// both, a glob matching the source; a denied volume is a 403 and the job
// is not registered.
func TestHostVolumeACL(t *testing.T) {
	w := newACLWorld(t)
	st := w.h.srv.State()
	policies := []*structs.ACLPolicy{
		{Name: "hv-read", Rules: "namespace \"team\" { policy = \"write\" }\nhost_volume \"shared\" { policy = \"read\" }"},
		{Name: "hv-write", Rules: "namespace \"team\" { policy = \"write\" }\nhost_volume \"sha*\" { policy = \"write\" }"},
		{Name: "hv-deny", Rules: "namespace \"team\" { policy = \"write\" }\nhost_volume \"*\" { policy = \"write\" }\nhost_volume \"shared\" { policy = \"deny\" }"},
	}
	if err := st.UpsertACLPolicies(200000, policies); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	var tokens []*structs.ACLToken
	for _, p := range policies {
		tok := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: p.Name, Type: structs.ACLClientToken, Policies: []string{p.Name}}
		secrets[p.Name] = tok.SecretID
		tokens = append(tokens, tok)
	}
	if err := st.UpsertACLTokens(200001, tokens); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token    string
		source   string
		readOnly bool
		want     int
	}{
		{"hv-read", "shared", true, http.StatusOK},
		{"hv-read", "shared", false, http.StatusForbidden},
		{"hv-read", "other", true, http.StatusForbidden},
		{"hv-write", "shared", false, http.StatusOK},
		{"hv-write", "shared", true, http.StatusOK},
		{"hv-write", "other", true, http.StatusForbidden},
		{"hv-deny", "shared", true, http.StatusForbidden},
		{"hv-deny", "other", false, http.StatusOK},
	} {
		w.secrets[callerNoCap] = secrets[tc.token]
		body := hostVolJobBody("team", tc.source, tc.readOnly)
		id := "hv-" + uuid.NewString()[:8]
		body["Job"].(map[string]any)["ID"], body["Job"].(map[string]any)["Name"] = id, id
		status, resp := w.do(callerNoCap, "POST", "/v1/jobs", body)
		if status != tc.want {
			t.Errorf("%s: source %s read_only %t: %d %.200s; want %d", tc.token, tc.source, tc.readOnly, status, resp, tc.want)
			continue
		}
		j, err := st.JobByID(nil, "team", id)
		if err != nil {
			t.Fatal(err)
		}
		if (j != nil) != (tc.want == http.StatusOK) {
			t.Errorf("%s: source %s read_only %t: job stored = %v", tc.token, tc.source, tc.readOnly, j != nil)
		}
	}

	// Reverting to a version with a host volume is registering it again:
	// the same rules.
	v0 := hostVolJobBody("team", "shared", false)
	v0["Job"].(map[string]any)["ID"], v0["Job"].(map[string]any)["Name"] = "rv", "rv"
	if status, resp := w.do(callerMgmt, "POST", "/v1/jobs", v0); status != http.StatusOK {
		t.Fatalf("register v0: %d %s", status, resp)
	}
	v1 := jobBody("team")
	v1["Job"].(map[string]any)["ID"], v1["Job"].(map[string]any)["Name"] = "rv", "rv"
	if status, resp := w.do(callerMgmt, "POST", "/v1/jobs", v1); status != http.StatusOK {
		t.Fatalf("register v1: %d %s", status, resp)
	}
	revert := map[string]any{"JobID": "rv", "JobVersion": 0}
	if status, resp := w.do(callerOtherNS, "PUT", "/v1/job/rv/revert?namespace=team", revert); status != http.StatusForbidden {
		t.Errorf("revert to a host volume version with namespace write alone: %d %.200s, want 403", status, resp)
	}
	w.secrets[callerNoCap] = secrets["hv-write"]
	if status, resp := w.do(callerNoCap, "PUT", "/v1/job/rv/revert?namespace=team", revert); status != http.StatusOK {
		t.Errorf("revert with host_volume write: %d %.200s, want 200", status, resp)
	}
}
