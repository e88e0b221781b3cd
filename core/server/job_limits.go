package server

import (
	"fmt"
	"math"
	"strings"

	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// Defaults of the allocation limits. A job of 100,000 allocations is about
// 400 MB of state; one plan of 25,000 stays well inside a Raft entry and
// the gRPC message limit, and holds a 10,000-node sysbatch job.
const (
	DefaultMaxAllocsPerJob  = 100_000
	DefaultMaxAllocsPerEval = 25_000
)

// checkAllocLimit refuses a job that asks for more allocations than
// MaxAllocsPerJob: the sum over its groups of count, times the candidate
// nodes (at least one, as nodes may join later) for a type whose plugin
// places per node.
func (ep Jobs) checkAllocLimit(job *structs.Job) error {
	s := ep.srv
	limit := s.cfg.MaxAllocsPerJob
	nodes := 1
	perNode := job.TypeBehavior != nil && job.TypeBehavior.PerNode
	if perNode {
		n, err := ep.candidateNodes(job)
		if err != nil {
			return err
		}
		nodes = max(n, 1)
	}
	// The sum saturates: counts come from the request, and a wrapped sum
	// (a count of math.MaxInt next to a count of 1) would pass the check.
	total, saturated := 0, false
	parts := make([]string, 0, min(len(job.TaskGroups), maxLimitParts))
	for _, tg := range job.TaskGroups {
		if tg.Count > 0 && !saturated {
			if tg.Count > (math.MaxInt-total)/nodes {
				saturated = true
			} else {
				total += tg.Count * nodes
			}
		}
		if len(parts) == maxLimitParts {
			continue
		}
		if perNode {
			parts = append(parts, fmt.Sprintf("group %q: count %d on each of %d candidate nodes", tg.Name, tg.Count, nodes))
		} else {
			parts = append(parts, fmt.Sprintf("group %q: count %d", tg.Name, tg.Count))
		}
	}
	if !saturated && total <= limit {
		return nil
	}
	if more := len(job.TaskGroups) - len(parts); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more groups", more))
	}
	asks := fmt.Sprintf("%d", total)
	if saturated {
		asks = fmt.Sprintf("more than %d", math.MaxInt)
	}
	return structs.NewError(structs.ErrInvalid,
		"job %q asks for %s allocations (%s), above the server limit max_allocs_per_job = %d",
		job.ID, asks, strings.Join(parts, "; "), limit)
}

// maxLimitParts bounds the groups the limit error lists: a job may have
// thousands, and the error goes back in one HTTP answer and one log line.
const maxLimitParts = 5

// candidateNodes counts the nodes a per-node job would run on: those of its
// pool and datacenters that are not down.
func (ep Jobs) candidateNodes(job *structs.Job) (int, error) {
	s := ep.srv
	snap, err := s.State().Snapshot()
	if err != nil {
		return 0, err
	}
	nodes, err := schedio.NodesOfPool(snap, job.NodePool)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range nodes {
		if node.Status != structs.NodeStatusDown && feasible.DatacenterMatches(job.Datacenters, node.Datacenter) {
			n++
		}
	}
	return n, nil
}
