package schema

import (
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// TestDBHasEveryTable: the schema is valid and has a table, with an "id"
// index, for every table name.
func TestDBHasEveryTable(t *testing.T) {
	s := DB()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{TableIndex, TableNodes, TableJobs, TableJobVersions, TableJobSummary,
		TableEvals, TableAllocs, TablePeriodicLaunch, TableSchedulerConfig, TableNamespaces, TablePKI,
		TableACLPolicies, TableACLTokens, TableOneTimeTokens, TableNodePools, TableCSIVolumes,
		TableCSIPlugins, TableScalingEvents, TableDeployments, TableServiceRegistrations, TableJobSubmissions} {
		tb, ok := s.Tables[name]
		if !ok || tb.Indexes["id"] == nil {
			t.Errorf("table %q: present %v, without an id index", name, ok)
		}
	}
}

// TestStringIndexExactAndPrefix: an exact lookup of "a" never matches "ab",
// a prefix scan of "a" matches both, and a (namespace, id) prefix stays in
// its namespace.
func TestStringIndexExactAndPrefix(t *testing.T) {
	db, err := memdb.NewMemDB(DB())
	if err != nil {
		t.Fatal(err)
	}
	txn := db.Txn(true)
	for _, e := range []*structs.Evaluation{
		{ID: "a", Namespace: "default", JobID: "web"},
		{ID: "ab", Namespace: "default", JobID: "web2"},
		{ID: "b", Namespace: "other", JobID: "web"},
	} {
		if err := txn.Insert(TableEvals, e); err != nil {
			t.Fatal(err)
		}
	}
	txn.Commit()

	count := func(index string, args ...any) int {
		it, err := db.Txn(false).Get(TableEvals, index, args...)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for raw := it.Next(); raw != nil; raw = it.Next() {
			n++
		}
		return n
	}
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"exact a", count("id", "a"), 1},
		{"prefix a", count("id_prefix", "a"), 2},
		{"job default/web", count("job", "default", "web"), 1},
		{"job prefix default/web", count("job_prefix", "default", "web"), 2},
		{"job prefix other/web", count("job_prefix", "other", "web"), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d rows, want %d", c.name, c.got, c.want)
		}
	}
}
