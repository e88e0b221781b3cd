package httpapi

// aclCRUDMatrixCases are the ACL matrix's cases of the policy and token
// routes.
func aclCRUDMatrixCases() []matrixCase { return nil }
