package structs

import "fmt"

// Input bounds. Everything that reaches the Raft log must decode again on
// every server, forever: an entry the FSM cannot decode stops the cluster.
// So the decoders at the edge (HTTP JSON, HCL job files) refuse what the
// internal ones (RPC and the FSM, both MessagePack) could not read back,
// and the internal ones share one depth bound derived from the edge's.
const (
	// MaxNestingDepth bounds how deeply objects and arrays nest in one
	// input: an HTTP JSON body counted from its outermost value, or an HCL
	// job file counted in blocks, brackets and parentheses. A job with a
	// task config takes about eight levels before the config starts, so
	// a driver config may still nest more than fifty levels.
	MaxNestingDepth = 64

	// MaxDecodeDepth bounds the MessagePack decoders of RPC and the FSM.
	// An input accepted at the edge travels inside a few levels of
	// request structs (a job in an allocation in a plan result); twice the
	// edge bound covers that with room to spare and stays far below the
	// codec's own default (1,024), whose overflow would be an undecodable
	// log entry.
	MaxDecodeDepth = 2 * MaxNestingDepth

	// MaxCollectionElements bounds the entries of one array or object in
	// an edge input (HTTP JSON, HCL). No real job comes near it; together
	// with the body limit it bounds the work one request can cause.
	MaxCollectionElements = 10_000

	// DefaultMaxRequestBodyBytes is the default cap on an HTTP request
	// body (agent config http_max_body_bytes). A large job is tens of
	// kilobytes; everything accepted ends up in the Raft log.
	DefaultMaxRequestBodyBytes = 8 << 20

	// MaxRPCRequestBytes caps one RPC request a server accepts. Forwarded
	// HTTP writes are the largest requests; it is well above the default
	// body limit so that an agent configured with a larger one still
	// forwards.
	MaxRPCRequestBytes = 64 << 20
)

// LimitError is an input that breaks one of the limits above. Its kind is
// ErrInvalid (a 400), or ErrTooLarge for a size limit (a 413).
type LimitError struct {
	// Where names the place: a JSON path ("Job.TaskGroups[0].Tasks[0].Config")
	// or a position ("job.hcl:12:7").
	Where string
	// Limit is the limit's name and value, e.g. "MaxNestingDepth (64)".
	Limit string
	// Msg says what broke it.
	Msg  string
	Kind error
}

func (e *LimitError) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("%s: exceeds limit %s", e.Msg, e.Limit)
	}
	return fmt.Sprintf("%s: %s: exceeds limit %s", e.Where, e.Msg, e.Limit)
}

// Unwrap exposes the kind.
func (e *LimitError) Unwrap() error { return e.Kind }

// DepthLimit names the nesting limit the way errors quote it.
func DepthLimit() string { return fmt.Sprintf("MaxNestingDepth (%d levels)", MaxNestingDepth) }

// ElementsLimit names the collection limit the way errors quote it.
func ElementsLimit() string { return fmt.Sprintf("MaxCollectionElements (%d)", MaxCollectionElements) }

// ErrNestingTooDeep builds the error for input nested past MaxNestingDepth.
func ErrNestingTooDeep(where string) error {
	return &LimitError{Where: where, Limit: DepthLimit(), Msg: "objects and arrays nest too deeply", Kind: ErrInvalid}
}

// ErrTooManyElements builds the error for a collection with more than
// MaxCollectionElements entries.
func ErrTooManyElements(where string, n int) error {
	return &LimitError{Where: where, Limit: ElementsLimit(), Msg: fmt.Sprintf("collection has %d or more entries", n), Kind: ErrInvalid}
}

// MaxTaskConfigDepth is how deeply a task's free-form Config may nest,
// counting the Config object itself: what MaxNestingDepth leaves below
// {"Job":{"TaskGroups":[{"Tasks":[{ in a JSON register body. The HCL
// parser and Job.Validate hold configs to it, so that a job accepted one
// way is accepted the others.
const MaxTaskConfigDepth = MaxNestingDepth - 6

// ValueDepth is how many levels of maps and lists a free-form value (a
// task config: map[string]any, []any, scalars) nests; a scalar is 0.
func ValueDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, ValueDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, ValueDepth(e))
		}
		return d + 1
	}
	return 0
}

// MaxElements is the size of the largest map or list in a free-form value.
func MaxElements(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n = len(x)
		for _, e := range x {
			n = max(n, MaxElements(e))
		}
	case []any:
		n = len(x)
		for _, e := range x {
			n = max(n, MaxElements(e))
		}
	}
	return n
}
