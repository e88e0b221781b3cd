package structs

// Bounds of an eval delete (DELETE /v1/evaluations), as Nomad's: at most
// MaxEvalIDsPerDelete IDs a request, and a filter of at most
// MaxEvalDeleteFilterBytes.
const (
	MaxEvalIDsPerDelete      = 7281
	MaxEvalDeleteFilterBytes = 4096
)

// EvalDeleteResponse is Nomad's answer to an eval delete: how many evals
// were deleted, and the index of the last entry that deleted them.
type EvalDeleteResponse struct {
	Count int
	Index uint64 `codec:",omitempty"`
}
