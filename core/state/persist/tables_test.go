package persist

import (
	"testing"

	"github.com/drover-org/drover/core/state/schema"
)

// TestEveryTablePersisted: a table added to the schema but not to Write
// would be silently missing from every snapshot and backup (a restore into
// a fresh cluster would lose it). Each table is written exactly once.
func TestEveryTablePersisted(t *testing.T) {
	written := map[string]int{schema.TableAllocs: 1, schema.TableCSIVolumes: 1}
	for _, tb := range plainTables {
		written[tb.table]++
	}
	for name := range schema.DB().Tables {
		switch n := written[name]; n {
		case 1:
		case 0:
			t.Errorf("table %s is in the schema but Write does not persist it", name)
		default:
			t.Errorf("table %s is persisted %d times", name, n)
		}
	}
	for name := range written {
		if _, ok := schema.DB().Tables[name]; !ok {
			t.Errorf("Write persists %s, which the schema does not hold", name)
		}
	}
}
