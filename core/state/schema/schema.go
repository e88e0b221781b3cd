package schema

import (
	"fmt"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// DB builds the state store's memdb schema: every table named in
// tables.go with its indexes. Indexers are typed closures instead of memdb's
// reflection-based field indexers: restoring 100,000 allocations inserts
// into every index of every row, and reflection dominated that cost.
func DB() *memdb.DBSchema {
	tables := []*memdb.TableSchema{
		{Name: TableIndex, Indexes: indexes(
			idx("id", true, false, str(func(e *IndexEntry) string { return e.Key })),
		)},
		{Name: TableNodes, Indexes: indexes(
			idx("id", true, false, str(func(n *structs.Node) string { return n.ID })),
			idx("secret_id", false, true, str(func(n *structs.Node) string { return n.SecretID })),
			idx("pool", false, true, str(func(n *structs.Node) string { return n.NodePool })),
		)},
		{Name: TableJobs, Indexes: indexes(
			idx("id", true, false, nsID(
				func(j *structs.Job) string { return j.Namespace },
				func(j *structs.Job) string { return j.ID })),
			idx("namespace", false, false, strEmpty(func(j *structs.Job) string { return j.Namespace })),
			idx("parent", false, true, nsID(
				func(j *structs.Job) string { return j.Namespace },
				func(j *structs.Job) string { return j.ParentID })),
			// The CSI plugins a job's tasks run: a plugin's expected counts.
			idx("csi_plugin", false, true, strs(jobCSIPlugins)),
			// Jobs whose type evaluates them on node changes (Nomad's jobs
			// by scheduler type, by declared behaviour): a node event reads
			// these, not every job.
			idx("node_evals", false, false, &memdb.ConditionalIndex{Conditional: func(obj any) (bool, error) {
				b := obj.(*structs.Job).TypeBehavior
				return b != nil && (b.EvalOnNodeUpdate || b.EvalOnNodeJoin), nil
			}}),
		)},
		{Name: TableJobVersions, Indexes: indexes(
			idx("id", true, false, &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				strEmpty(func(j *structs.Job) string { return j.Namespace }),
				str(func(j *structs.Job) string { return j.ID }),
				&memdb.UintFieldIndex{Field: "Version"},
			}}),
			idx("job", false, false, nsID(
				func(j *structs.Job) string { return j.Namespace },
				func(j *structs.Job) string { return j.ID })),
		)},
		{Name: TableJobSummary, Indexes: indexes(
			idx("id", true, false, nsID(
				func(s *structs.JobSummary) string { return s.Namespace },
				func(s *structs.JobSummary) string { return s.JobID })),
		)},
		{Name: TableEvals, Indexes: indexes(
			idx("id", true, false, str(func(e *structs.Evaluation) string { return e.ID })),
			idx("job", false, true, nsID(
				func(e *structs.Evaluation) string { return e.Namespace },
				func(e *structs.Evaluation) string { return e.JobID })),
		)},
		{Name: TableAllocs, Indexes: indexes(
			idx("id", true, false, str(func(a *structs.Allocation) string { return a.ID })),
			// One index serves both AllocsByNode (two range scans) and
			// AllocsByNodeTerminal: every alloc index costs on every
			// alloc write.
			idx("node_terminal", false, true, &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				str(func(a *structs.Allocation) string { return a.NodeID }),
				&memdb.ConditionalIndex{Conditional: func(obj any) (bool, error) {
					return obj.(*structs.Allocation).TerminalStatus(), nil
				}},
			}}),
			idx("job", false, true, nsID(
				func(a *structs.Allocation) string { return a.Namespace },
				func(a *structs.Allocation) string { return a.JobID })),
			idx("eval", false, true, str(func(a *structs.Allocation) string { return a.EvalID })),
		)},
		{Name: TablePeriodicLaunch, Indexes: indexes(
			idx("id", true, false, nsID(
				func(l *structs.PeriodicLaunch) string { return l.Namespace },
				func(l *structs.PeriodicLaunch) string { return l.ID })),
		)},
		{Name: TableNamespaces, Indexes: indexes(
			idx("id", true, false, str(func(n *structs.Namespace) string { return n.Name })),
		)},
		{Name: TableSchedulerConfig, Indexes: indexes(
			// A single row: every config indexes as "true".
			idx("id", true, false, &memdb.ConditionalIndex{Conditional: func(any) (bool, error) { return true, nil }}),
		)},
		pkiTableSchema(),
		nodePoolsTable(),
		scalingEventsTable(),
		serviceRegistrationsTable(),
		jobSubmissionsTable(),
	}
	tables = append(tables, aclTables()...)
	tables = append(tables, aclAuthTables()...)
	tables = append(tables, csiTables()...)
	tables = append(tables, deploymentTables()...)
	tables = append(tables, variablesTables()...)
	s := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{}}
	for _, t := range tables {
		s.Tables[t.Name] = t
	}
	return s
}

func aclTables() []*memdb.TableSchema {
	return []*memdb.TableSchema{
		{Name: TableACLPolicies, Indexes: indexes(
			idx("id", true, false, str(func(p *structs.ACLPolicy) string { return p.Name })),
		)},
		{Name: TableACLTokens, Indexes: indexes(
			idx("id", true, false, str(func(t *structs.ACLToken) string { return t.AccessorID })),
			idx("secret", true, false, str(func(t *structs.ACLToken) string { return t.SecretID })),
		)},
		{Name: TableACLRoles, Indexes: indexes(
			idx("id", true, false, str(func(r *structs.ACLRole) string { return r.ID })),
			idx("name", true, false, str(func(r *structs.ACLRole) string { return r.Name })),
		)},
		{Name: TableOneTimeTokens, Indexes: indexes(
			idx("id", true, false, str(func(o *structs.OneTimeToken) string { return o.AccessorID })),
			idx("secret", true, false, str(func(o *structs.OneTimeToken) string { return o.OneTimeSecretID })),
		)},
	}
}

func csiTables() []*memdb.TableSchema {
	return []*memdb.TableSchema{
		{Name: TableCSIVolumes, Indexes: indexes(
			idx("id", true, false, nsID(
				func(v *structs.CSIVolume) string { return v.Namespace },
				func(v *structs.CSIVolume) string { return v.ID })),
			idx("plugin_id", false, false, str(func(v *structs.CSIVolume) string { return v.PluginID })),
			// The volume watcher reads only what changed since its last read.
			idx("modify_index", false, false, &memdb.UintFieldIndex{Field: "ModifyIndex"}),
		)},
		{Name: TableCSIPlugins, Indexes: indexes(
			idx("id", true, false, str(func(p *structs.CSIPlugin) string { return p.ID })),
		)},
	}
}

func deploymentTables() []*memdb.TableSchema {
	return []*memdb.TableSchema{{Name: TableDeployments, Indexes: indexes(
		idx("id", true, false, str(func(d *structs.Deployment) string { return d.ID })),
		idx("job", false, false, nsID(
			func(d *structs.Deployment) string { return d.Namespace },
			func(d *structs.Deployment) string { return d.JobID })),
	)}}
}

func nodePoolsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableNodePools, Indexes: indexes(
		idx("id", true, false, str(func(p *structs.NodePool) string { return p.Name })),
	)}
}

func pkiTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TablePKI, Indexes: indexes(
		idx("id", true, false, &memdb.ConditionalIndex{Conditional: func(any) (bool, error) { return true, nil }}),
	)}
}

func scalingEventsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableScalingEvents, Indexes: indexes(
		idx("id", true, false, nsID(
			func(e *structs.JobScalingEvents) string { return e.Namespace },
			func(e *structs.JobScalingEvents) string { return e.JobID })),
	)}
}

func serviceRegistrationsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableServiceRegistrations, Indexes: indexes(
		idx("id", true, false, str(func(r *structs.ServiceRegistration) string { return r.ID })),
		idx("service_name", false, true, nsID(
			func(r *structs.ServiceRegistration) string { return r.Namespace },
			func(r *structs.ServiceRegistration) string { return r.ServiceName })),
		idx("alloc", false, true, str(func(r *structs.ServiceRegistration) string { return r.AllocID })),
		idx("node", false, true, str(func(r *structs.ServiceRegistration) string { return r.NodeID })),
		idx("job", false, true, nsID(
			func(r *structs.ServiceRegistration) string { return r.Namespace },
			func(r *structs.ServiceRegistration) string { return r.JobID })),
	)}
}

func indexes(list ...*memdb.IndexSchema) map[string]*memdb.IndexSchema {
	m := make(map[string]*memdb.IndexSchema, len(list))
	for _, i := range list {
		m[i.Name] = i
	}
	return m
}

func idx(name string, unique, allowMissing bool, ix memdb.Indexer) *memdb.IndexSchema {
	return &memdb.IndexSchema{Name: name, Unique: unique, AllowMissing: allowMissing, Indexer: ix}
}

// stringIndexer indexes one string of an object, NUL-terminated like memdb's
// StringFieldIndex so that an exact lookup of "a" never matches "ab", and
// supports prefix scans.
type stringIndexer[T any] struct {
	get        func(T) string
	allowEmpty bool
}

// str indexes a string that must be non-empty to be indexed.
func str[T any](get func(T) string) *stringIndexer[T] { return &stringIndexer[T]{get: get} }

// strEmpty indexes a string that may be empty (namespaces of objects that
// were never canonicalized, e.g. in tests).
func strEmpty[T any](get func(T) string) *stringIndexer[T] {
	return &stringIndexer[T]{get: get, allowEmpty: true}
}

func (s *stringIndexer[T]) FromObject(obj any) (bool, []byte, error) {
	o, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("indexer: unexpected object type %T", obj)
	}
	v := s.get(o)
	if v == "" && !s.allowEmpty {
		return false, nil, nil
	}
	return true, append([]byte(v), 0), nil
}

func (s *stringIndexer[T]) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("indexer: expected one argument, got %d", len(args))
	}
	v, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("indexer: argument must be a string, got %T", args[0])
	}
	return append([]byte(v), 0), nil
}

func (s *stringIndexer[T]) PrefixFromArgs(args ...any) ([]byte, error) {
	v, err := s.FromArgs(args...)
	if err != nil {
		return nil, err
	}
	return v[:len(v)-1], nil
}

// stringsIndexer indexes each of several non-empty strings of an object
// (a multi-index), NUL-terminated like stringIndexer.
type stringsIndexer[T any] struct{ get func(T) []string }

func strs[T any](get func(T) []string) *stringsIndexer[T] { return &stringsIndexer[T]{get: get} }

func (s *stringsIndexer[T]) FromObject(obj any) (bool, [][]byte, error) {
	o, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("indexer: unexpected object type %T", obj)
	}
	var out [][]byte
	for _, v := range s.get(o) {
		if v != "" {
			out = append(out, append([]byte(v), 0))
		}
	}
	return len(out) > 0, out, nil
}

func (s *stringsIndexer[T]) FromArgs(args ...any) ([]byte, error) {
	return (&stringIndexer[T]{}).FromArgs(args...)
}

// jobCSIPlugins lists the distinct CSI plugin IDs a job's tasks run.
func jobCSIPlugins(j *structs.Job) []string {
	var out []string
	for _, tg := range j.TaskGroups {
		for _, t := range tg.Tasks {
			if t != nil && t.CSIPluginConfig != nil && !slices.Contains(out, t.CSIPluginConfig.ID) {
				out = append(out, t.CSIPluginConfig.ID)
			}
		}
	}
	return out
}

// nsID indexes (namespace, id); a prefix scan with (ns, p) matches every ID
// of ns that starts with p. The object is left out of the index when id is
// empty (e.g. a job without a parent).
func nsID[T any](ns, id func(T) string) *memdb.CompoundIndex {
	return &memdb.CompoundIndex{Indexes: []memdb.Indexer{strEmpty(ns), str(id)}}
}
