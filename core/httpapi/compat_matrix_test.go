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
		{"DELETE /v1/evaluations", "DELETE", "/v1/evaluations", map[string]any{"EvalIDs": []string{nobody}}, "----x"}, // management: 400 (the broker runs; TestAdminRoutes)
		// node:write; a missing node is the server's 404.
		{"POST /v1/node/{id}/evaluate", "POST", "/v1/node/" + nobody + "/evaluate", nil, "----4"},
		{"PUT /v1/node/{id}/evaluate", "PUT", "/v1/node/" + nobody + "/evaluate", nil, "----4"},
		{"POST /v1/node/{id}/purge", "POST", "/v1/node/" + nobody + "/purge", nil, "----4"},
		{"PUT /v1/node/{id}/purge", "PUT", "/v1/node/" + nobody + "/purge", nil, "----4"},

		// This agent's operations: agent:read to look, agent:write to
		// change or profile. The test server is no cluster and has no
		// logger to monitor: those answer allowed callers 4xx/501.
		{"GET /v1/agent/monitor", "GET", "/v1/agent/monitor?log_level=bogus", nil, "---xx"},
		{"PUT /v1/agent/join", "PUT", "/v1/agent/join?address=192.0.2.1:4647", nil, "----x"},
		{"POST /v1/agent/join", "POST", "/v1/agent/join?address=192.0.2.1:4647", nil, "----x"},
		{"PUT /v1/agent/force-leave", "PUT", "/v1/agent/force-leave?node=gone", nil, "----x"},
		{"POST /v1/agent/force-leave", "POST", "/v1/agent/force-leave?node=gone", nil, "----x"},
		{"GET /v1/agent/schedulers", "GET", "/v1/agent/schedulers", nil, "---xx"},
		{"GET /v1/agent/schedulers/config", "GET", "/v1/agent/schedulers/config", nil, "---xx"},
		{"PUT /v1/agent/schedulers/config", "PUT", "/v1/agent/schedulers/config", map[string]any{"num_schedulers": 1}, "----x"},
		{"POST /v1/agent/schedulers/config", "POST", "/v1/agent/schedulers/config", map[string]any{"num_schedulers": 1}, "----x"},
		{"GET /v1/agent/pprof/{profile}", "GET", "/v1/agent/pprof/goroutine", nil, "----2"},
		{"GET /v1/agent/pprof/{profile}", "GET", "/v1/agent/pprof/nosuch", nil, "----4"},

		// Nomad's UI entry points redirect whoever asks to /ui/ (the
		// client follows): / ends on the jobs list, which each caller
		// sees as its namespaces allow; an unknown ott is refused.
		{"GET /{$}", "GET", "/", nil, "--222"},
		{"GET /ui", "GET", "/ui?ott=" + nobody, nil, "-----"},
	}
}
