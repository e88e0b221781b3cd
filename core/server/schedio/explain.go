package schedio

import (
	"fmt"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// explainNoEligibleNodes completes the placement failures of a job whose
// groups found no node to evaluate at all (NodesEvaluated 0), so that the
// eval's FailedTGAllocs say where the nodes are missing, as Nomad's do:
// NodePool names the job's pool and NodesInPool counts the pool's nodes
// that could take work (ready, eligible, not draining); when the pool has
// some, each of the job's datacenters that holds none of them is listed in
// NodesAvailable with 0. Scheduler plugins only count the nodes they were
// sent (the pool's, in the job's datacenters), which cannot tell an empty
// pool from a datacenter without nodes.
func explainNoEligibleNodes(nodes []*structs.Node, job *structs.Job, failed map[string]*structs.AllocMetric) {
	if job == nil || len(failed) == 0 {
		return
	}
	var inPool int
	byDC := map[string]int{}
	for _, n := range nodes {
		if !feasible.PoolMatches(job.NodePool, n.NodePool) || n.Status != structs.NodeStatusReady ||
			n.SchedulingEligibility == structs.NodeSchedulingIneligible || n.DrainStrategy != nil {
			continue
		}
		inPool++
		for _, dc := range job.Datacenters {
			if feasible.DatacenterMatches([]string{dc}, n.Datacenter) {
				byDC[dc]++
			}
		}
	}
	pool := job.NodePool
	if pool == "" {
		pool = structs.NodePoolDefault
	}
	for _, m := range failed {
		if m == nil || m.NodesEvaluated != 0 {
			continue
		}
		m.NodePool, m.NodesInPool = pool, inPool
		if inPool == 0 {
			continue
		}
		for _, dc := range job.Datacenters {
			if byDC[dc] == 0 {
				if m.NodesAvailable == nil {
					m.NodesAvailable = map[string]int{}
				}
				m.NodesAvailable[dc] = 0
			}
		}
	}
}

// ExplainFailures applies explainNoEligibleNodes with the job (read from
// st when nil) and the nodes of its pool in st. The explanation is
// advisory: on a read error the metrics are left as they are and the error
// is returned for the caller to log.
func ExplainFailures(st ExplainState, ns, jobID string, job *structs.Job, failed map[string]*structs.AllocMetric) error {
	if !needsExplanation(failed) {
		return nil
	}
	if job == nil {
		j, err := st.JobByID(nil, ns, jobID)
		if err != nil || j == nil {
			return nil
		}
		job = j
	}
	pool := job.NodePool
	if pool == "" {
		pool = structs.NodePoolDefault
	}
	nodes, err := st.NodesByPool(nil, pool)
	if err != nil {
		return fmt.Errorf("read nodes of pool %q: %w", pool, err)
	}
	explainNoEligibleNodes(nodes, job, failed)
	return nil
}

func needsExplanation(failed map[string]*structs.AllocMetric) bool {
	for _, m := range failed {
		if m != nil && m.NodesEvaluated == 0 {
			return true
		}
	}
	return false
}
