package httpapi

// variableMatrixCases are the ACL matrix rows of variables and the
// keyring: the team-write caller has every variables capability in team
// (a namespace write policy grants them on "*"), the read-only caller
// read and list in default, the others none.
func variableMatrixCases() []matrixCase {
	item := map[string]any{"Items": map[string]string{"k": "v"}}
	return []matrixCase{
		{"GET /v1/vars", "GET", "/v1/vars", nil, "---22"},
		{"GET /v1/vars", "GET", "/v1/vars?namespace=team", nil, "--2-2"},
		{"GET /v1/vars", "GET", "/v1/vars?namespace=*", nil, "22222"}, // filtered row by row
		{"GET /v1/var/{path...}", "GET", "/v1/var/missing", nil, "---44"},
		{"GET /v1/var/{path...}", "GET", "/v1/var/missing?namespace=team", nil, "--4-4"},
		{"PUT /v1/var/{path...}", "PUT", "/v1/var/m/a", item, "----2"},
		{"PUT /v1/var/{path...}", "PUT", "/v1/var/m/a?namespace=team", item, "--2-2"},
		{"PUT /v1/var/{path...}", "PUT", "/v1/var/m/b", map[string]any{"Namespace": "team", "Items": map[string]string{"k": "v"}}, "--2-2"},
		{"POST /v1/var/{path...}", "POST", "/v1/var/m/c?lock-acquire", item, "----2"},
		{"DELETE /v1/var/{path...}", "DELETE", "/v1/var/m/a", nil, "----x"}, // 204
		{"DELETE /v1/var/{path...}", "DELETE", "/v1/var/m/a?namespace=team", nil, "--x-x"},
		{"GET /v1/operator/keyring/keys", "GET", "/v1/operator/keyring/keys", nil, "----2"},
		{"PUT /v1/operator/keyring/rotate", "PUT", "/v1/operator/keyring/rotate", nil, "----2"},
		{"DELETE /v1/operator/keyring/key/{id}", "DELETE", "/v1/operator/keyring/key/00000000-0000-0000-0000-000000000000", nil, "----4"},
		{"POST /v1/operator/keyring/rotate", "POST", "/v1/operator/keyring/rotate?full=true", nil, "----2"},
	}
}
