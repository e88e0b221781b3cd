package state

import "github.com/drover-org/drover/core/state/schema"

// Table names (core/state/schema builds their tables and indexes). They are
// also the keys of the "index" table, so Index(TableAllocs) is the Raft
// index of the last write to allocations.
const (
	TableIndex           = schema.TableIndex
	TableNodes           = schema.TableNodes
	TableJobs            = schema.TableJobs
	TableJobVersions     = schema.TableJobVersions
	TableJobSummary      = schema.TableJobSummary
	TableEvals           = schema.TableEvals
	TableAllocs          = schema.TableAllocs
	TablePeriodicLaunch  = schema.TablePeriodicLaunch
	TableSchedulerConfig = schema.TableSchedulerConfig
	TableNamespaces      = schema.TableNamespaces
)

// AllNamespaces is the namespace wildcard accepted by the list and prefix
// readers, as in Nomad's `?namespace=*`.
const AllNamespaces = "*"

// IndexEntry is a row of the "index" table: the Raft index that last wrote a
// table. Blocking queries on lists compare against it.
type IndexEntry = schema.IndexEntry
