// Package schema is the state store's memdb schema: the table names, the
// row of the "index" table, and the tables' indexes. It holds no state and
// does no I/O; core/state builds its database from DB and the snapshot
// codec (core/state/persist) names tables with these constants.
package schema

// Table names. They are also the keys of the "index" table, so the row
// keyed TableAllocs holds the Raft index of the last write to allocations.
const (
	TableIndex           = "index"
	TableNodes           = "nodes"
	TableJobs            = "jobs"
	TableJobVersions     = "job_versions"
	TableJobSummary      = "job_summary"
	TableEvals           = "evals"
	TableAllocs          = "allocs"
	TablePeriodicLaunch  = "periodic_launch"
	TableSchedulerConfig = "scheduler_config"
	TableNamespaces      = "namespaces"

	// TablePKI holds the cluster PKI: one row, or none before the first
	// server stored its CA.
	TablePKI = "pki"

	// ACL tables (§6). Tokens are keyed by AccessorID, with a unique index
	// on SecretID for the resolver; one-time tokens are keyed by the
	// AccessorID of the token they stand for (one live OTT per token), with
	// a unique index on their secret.
	TableACLPolicies   = "acl_policies"
	TableACLTokens     = "acl_tokens"
	TableOneTimeTokens = "one_time_tokens"
	// TableACLRoles holds ACL roles keyed by ID, with a unique index on
	// Name.
	TableACLRoles = "acl_roles"

	TableNodePools            = "node_pools"
	TableCSIVolumes           = "csi_volumes"
	TableCSIPlugins           = "csi_plugins"
	TableScalingEvents        = "scaling_events"
	TableDeployments          = "deployments"
	TableServiceRegistrations = "service_registrations"
)

// IndexEntry is a row of the "index" table: the Raft index that last wrote a
// table. Blocking queries on lists compare against it.
type IndexEntry struct {
	Key   string
	Value uint64
}
