package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"testing"
)

// nodePoolMatrixCases are the node pool routes of TestACLMatrix: reads
// need node read (the read-only caller has it), writes node write (only
// management here).
func nodePoolMatrixCases() []matrixCase {
	return []matrixCase{
		{"GET /v1/node/pools", "GET", "/v1/node/pools", nil, "---22"},
		{"GET /v1/node/pools", "GET", "/v1/node/pools?prefix=de", nil, "---22"},
		{"PUT /v1/node/pools", "PUT", "/v1/node/pools", map[string]string{"Name": "acl-pool"}, "----2"},
		{"POST /v1/node/pools", "POST", "/v1/node/pools", map[string]string{"Name": "acl-pool2"}, "----2"},
		{"GET /v1/node/{id}/{sub}", "GET", "/v1/node/pool/default", nil, "---22"},
		{"GET /v1/node/{id}/{sub}", "GET", "/v1/node/pool/nope", nil, "---44"},
		{"GET /v1/node/pool/{name}/nodes", "GET", "/v1/node/pool/default/nodes", nil, "---22"},
		// The read-only caller lists the jobs of default only.
		{"GET /v1/node/pool/{name}/jobs", "GET", "/v1/node/pool/default/jobs", nil, "---22"},
		{"GET /v1/node/pool/{name}/jobs", "GET", "/v1/node/pool/default/jobs?namespace=*", nil, "---22"},
		{"DELETE /v1/node/pool/{name}", "DELETE", "/v1/node/pool/acl-pool2", nil, "----2"},
		{"DELETE /v1/node/pool/{name}", "DELETE", "/v1/node/pool/default", nil, "----x"},
	}
}

// TestNodePoolJobsNamespaceFilter: a pool's jobs across namespaces show
// a caller only the namespaces it may list jobs in.
func TestNodePoolJobsNamespaceFilter(t *testing.T) {
	w := newACLWorld(t)
	nsOf := func(caller int) []string {
		t.Helper()
		status, body := w.do(caller, "GET", "/v1/node/pool/default/jobs?namespace=*", nil)
		if status != http.StatusOK {
			t.Fatalf("as %s: %d %s", callerNames[caller], status, body)
		}
		var stubs []struct{ ID, Namespace string }
		if err := json.Unmarshal(body, &stubs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range stubs {
			out = append(out, s.Namespace)
		}
		sort.Strings(out)
		return out
	}
	if got := nsOf(callerReadOnly); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("read-only caller sees jobs of %v", got)
	}
	if got := nsOf(callerMgmt); !slices.Equal(got, []string{"default", "team"}) {
		t.Fatalf("management sees jobs of %v", got)
	}
}
