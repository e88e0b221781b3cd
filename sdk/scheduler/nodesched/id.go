package nodesched

import "github.com/drover-org/drover/sdk/scheduler/derivedid"

// AllocID derives the ID of a new allocation from what makes it unique in
// one scheduling attempt: the eval, the attempt number, the node and the
// allocation name. The same request therefore always yields the same plan,
// which golden tests and replays rely on, while a retried attempt (whose
// earlier plan may have partly committed) never reuses an ID.
//
// The result is formatted as an RFC 9562 version-8 (custom) UUID so that
// tools expecting UUIDs accept it.
func AllocID(evalID string, attempt int32, nodeID, name string) string {
	id, _ := appendAllocID(nil, evalID, attempt, nodeID, name)
	return id
}

// appendAllocID is AllocID with a reusable scratch buffer.
func appendAllocID(buf []byte, evalID string, attempt int32, nodeID, name string) (string, []byte) {
	return derivedid.Append(buf, int64(attempt), evalID, nodeID, name)
}
