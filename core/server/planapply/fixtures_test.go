package planapply

import (
	"github.com/drover-org/drover/core/server/internal/servertest"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
)

// testNode is servertest.Node.
func testNode(name string) *structs.Node { return servertest.Node(name) }

// testJob is a one-group job of type typ with the built-in declaration of
// typ, as the leader stamps it on registration.
func testJob(id, typ string) *structs.Job {
	var b *structs.JobTypeBehavior
	if d, ok := (builtin.InProcess{}).JobType(typ); ok {
		b = &d
	}
	return servertest.Job(id, typ, b)
}
