package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// AmbiguousError is a prefix that matched several objects; its message
// lists them so that the user can pick one.
type AmbiguousError struct{ Msg string }

func (e *AmbiguousError) Error() string { return e.Msg }

// ErrNoMatch is a prefix that matched nothing.
var ErrNoMatch = errors.New("no match")

func PrefixQuery(prefix string, allNamespaces bool) url.Values {
	q := url.Values{"prefix": {prefix}}
	if allNamespaces {
		q.Set("namespace", "*")
	}
	return q
}

// ResolveJob finds the job an ID or ID prefix names: an exact ID wins,
// else a single prefix match.
func ResolveJob(ctx context.Context, c *APIClient, id string) (*structs.JobListStub, error) {
	var jobs []*structs.JobListStub
	if _, err := c.Get(ctx, "/v1/jobs", PrefixQuery(id, false), &jobs); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, nil
		}
	}
	switch len(jobs) {
	case 0:
		return nil, fmt.Errorf("No job(s) with prefix or id %q found: %w", id, ErrNoMatch)
	case 1:
		return jobs[0], nil
	}
	rows := []string{"ID|Type|Priority|Status|Submit Date"}
	for _, j := range jobs {
		rows = append(rows, fmt.Sprintf("%s|%s|%d|%s|%s", j.ID, jobTypeString(j.Type, j.Periodic, j.ParameterizedJob), j.Priority, j.Status, FormatUnixNano(j.SubmitTime)))
	}
	return nil, &AmbiguousError{Msg: "Prefix matched multiple jobs\n\n" + FormatList(rows)}
}

// ResolveAllocID finds the full ID of the allocation a prefix names, in any
// namespace.
func ResolveAllocID(ctx context.Context, c *APIClient, prefix string) (string, error) {
	if len(prefix) < 2 {
		return "", errors.New("Alloc ID must contain at least two characters")
	}
	var allocs []*structs.AllocListStub
	if _, err := c.Get(ctx, "/v1/allocations", PrefixQuery(prefix, true), &allocs); err != nil {
		return "", err
	}
	switch len(allocs) {
	case 0:
		return "", fmt.Errorf("No allocation(s) with prefix or id %q found: %w", prefix, ErrNoMatch)
	case 1:
		return allocs[0].ID, nil
	}
	rows := []string{"ID|Eval ID|Job ID|Task Group|Desired Status|Client Status"}
	for _, a := range allocs {
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%s|%s|%s", a.ID, LimitID(a.EvalID, false), a.JobID, a.TaskGroup, a.DesiredStatus, a.ClientStatus))
	}
	return "", &AmbiguousError{Msg: "Prefix matched multiple allocations\n\n" + FormatList(rows)}
}

// ResolveEvalID finds the full ID of the evaluation a prefix names.
func ResolveEvalID(ctx context.Context, c *APIClient, prefix string) (string, error) {
	if len(prefix) < 2 {
		return "", errors.New("Eval ID must contain at least two characters")
	}
	var evals []*structs.Evaluation
	if _, err := c.Get(ctx, "/v1/evaluations", PrefixQuery(prefix, true), &evals); err != nil {
		return "", err
	}
	switch len(evals) {
	case 0:
		return "", fmt.Errorf("No evaluation(s) with prefix or id %q found: %w", prefix, ErrNoMatch)
	case 1:
		return evals[0].ID, nil
	}
	rows := []string{"ID|Priority|Type|Triggered By|Status"}
	for _, e := range evals {
		rows = append(rows, fmt.Sprintf("%s|%d|%s|%s|%s", e.ID, e.Priority, e.Type, e.TriggeredBy, e.Status))
	}
	return "", &AmbiguousError{Msg: "Prefix matched multiple evaluations\n\n" + FormatList(rows)}
}

// resolveNodeID finds the full ID of the node a prefix names.
func resolveNodeID(ctx context.Context, c *APIClient, prefix string) (string, error) {
	if len(prefix) < 2 {
		return "", errors.New("Node ID must contain at least two characters")
	}
	var nodes []*structs.NodeListStub
	if _, err := c.Get(ctx, "/v1/nodes", PrefixQuery(prefix, false), &nodes); err != nil {
		return "", err
	}
	switch len(nodes) {
	case 0:
		return "", fmt.Errorf("No node(s) with prefix %q found: %w", prefix, ErrNoMatch)
	case 1:
		return nodes[0].ID, nil
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return "", &AmbiguousError{Msg: "Prefix matched multiple nodes\n\n" + FormatNodeStubs(nodes, true)}
}

// lookupMessage renders a lookup failure without the sentinel's wrapping.
func lookupMessage(err error) string {
	if errors.Is(err, ErrNoMatch) {
		return strings.TrimSuffix(err.Error(), ": "+ErrNoMatch.Error())
	}
	return err.Error()
}

// jobTypeString shows parents as "batch/periodic" or "batch/parameterized".
func jobTypeString(typ string, periodic, parameterized bool) string {
	switch {
	case periodic:
		return typ + "/periodic"
	case parameterized:
		return typ + "/parameterized"
	}
	return typ
}

// localNodeID asks the agent for the ID of its own client node.
func localNodeID(ctx context.Context, c *APIClient) (string, error) {
	var self struct {
		Stats map[string]map[string]any `json:"stats"`
	}
	if _, err := c.Get(ctx, "/v1/agent/self", nil, &self); err != nil {
		return "", err
	}
	if id, ok := self.Stats["client"]["node_id"].(string); ok && id != "" {
		return id, nil
	}
	return "", errors.New("agent is not running a client")
}
