package httpapi

// nomadCompatMatrixCases are the ACL matrix's cases of the endpoints added
// for Nomad's CLI (search, job validation, eval delete, node evaluate and
// purge, job submissions).
func nomadCompatMatrixCases(nobody string) []matrixCase {
	return []matrixCase{
		// An explicit context needs the listing capability in the
		// namespace; "all" answers everyone with what each may list.
		{"PUT /v1/search", "PUT", "/v1/search", map[string]string{"Prefix": "w", "Context": "jobs"}, "---22"},
		{"PUT /v1/search", "PUT", "/v1/search?namespace=team", map[string]string{"Prefix": "w", "Context": "jobs"}, "--2-2"},
		{"PUT /v1/search", "PUT", "/v1/search", map[string]string{"Prefix": "", "Context": "nodes"}, "---22"},
		{"POST /v1/search", "POST", "/v1/search", map[string]string{"Prefix": "", "Context": "all"}, "22222"},
		{"PUT /v1/search/fuzzy", "PUT", "/v1/search/fuzzy?namespace=team", map[string]string{"Text": "we", "Context": "jobs"}, "--2-2"},
		{"POST /v1/search/fuzzy", "POST", "/v1/search/fuzzy", map[string]string{"Text": "we", "Context": "all"}, "22222"},
		// A job's source: read-job in its namespace (none was sent: 404).
		{"/v1/job/", "GET", "/v1/job/web/submission?version=0", nil, "---44"},
		{"/v1/job/", "GET", "/v1/job/web/submission?version=0&namespace=team", nil, "--4-4"},
		// read-job in the job's namespace, as Nomad.
		{"PUT /v1/validate/job", "PUT", "/v1/validate/job", jobBody("default"), "---22"},
		{"POST /v1/validate/job", "POST", "/v1/validate/job", jobBody("team"), "--2-2"},
		// Management only; a missing eval is no error (count 0).
		{"DELETE /v1/evaluations", "DELETE", "/v1/evaluations", map[string]any{"EvalIDs": []string{nobody}}, "----2"},
		// node:write; a missing node is the server's 404.
		{"POST /v1/node/{id}/evaluate", "POST", "/v1/node/" + nobody + "/evaluate", nil, "----4"},
		{"PUT /v1/node/{id}/evaluate", "PUT", "/v1/node/" + nobody + "/evaluate", nil, "----4"},
		{"POST /v1/node/{id}/purge", "POST", "/v1/node/" + nobody + "/purge", nil, "----4"},
		{"PUT /v1/node/{id}/purge", "PUT", "/v1/node/" + nobody + "/purge", nil, "----4"},
	}
}
