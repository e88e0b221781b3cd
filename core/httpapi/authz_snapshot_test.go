package httpapi

// snapshotMatrixCases: a backup holds every secret and a restore replaces
// the whole state, so only the management token passes. The restore body
// is not a snapshot file: management gets the 400 of a refused file (and
// the world is left as it was for the cases after it).
func snapshotMatrixCases() []matrixCase {
	return []matrixCase{
		{"GET /v1/operator/snapshot", "GET", "/v1/operator/snapshot", nil, "----x"},
		{"GET /v1/operator/snapshot", "GET", "/v1/operator/snapshot?stale", nil, "----x"},
		{"PUT /v1/operator/snapshot", "PUT", "/v1/operator/snapshot", map[string]any{"not": "a snapshot"}, "----x"},
	}
}
