package structs

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The jobspec blocks of Nomad 1.6 and later that drover keeps as data
// (a job's ui block, a task's kind and actions, a group's scaling policy)
// or refuses at submit with the reason (devices, the disconnect blocks):
// their Nomad JSON shapes, defaults and rules.

// Bounds of these blocks, so that what reaches the Raft log stays small.
const (
	MaxUIDescriptionBytes = 4 << 10
	MaxUILinks            = 32
	MaxUILinkBytes        = 2 << 10 // a link's label or URL
	MaxTaskKindBytes      = 256
	MaxActionsPerTask     = 32
	MaxActionNameBytes    = 128
	MaxActionCommandBytes = 4 << 10
	MaxActionArgs         = 128
	MaxActionArgBytes     = 4 << 10
	MaxDevicesPerTask     = 16
	MaxScalingPolicyBytes = 16 << 10 // a scaling policy block, JSON-encoded
	MaxScalingPolicyDepth = 16
	MaxSecretsMB          = 1 << 20
)

// ScalingPolicyTypeHorizontal is the type of a group's scaling policy,
// which scales its count.
const ScalingPolicyTypeHorizontal = "horizontal"

// Disconnect reconcile options (Nomad's).
const (
	ReconcileKeepOriginal    = "keep_original"
	ReconcileKeepReplacement = "keep_replacement"
	ReconcileBestScore       = "best_score"
	ReconcileLongestRunning  = "longest_running"
)

// NUMAAffinityNone is the NUMA affinity of a task that asks for none.
const NUMAAffinityNone = "none"

// JobUIConfig is a job's ui block: what the web UI shows about the job.
type JobUIConfig struct {
	Description string       `codec:",omitempty" bound:"bytes=MaxUIDescriptionBytes"`
	Links       []*JobUILink `codec:",omitempty" bound:"max=MaxUILinks"`
}

// JobUILink is one link of a job's ui block.
type JobUILink struct {
	Label string `codec:",omitempty" bound:"bytes=MaxUILinkBytes"`
	URL   string `codec:",omitempty" bound:"bytes=MaxUILinkBytes"`
}

// Action is a task's action block: a command an operator may run in the
// task by name. drover keeps and shows actions; it does not run them.
type Action struct {
	Name    string   `codec:",omitempty" bound:"id,bytes=MaxActionNameBytes"`
	Command string   `codec:",omitempty" bound:"bytes=MaxActionCommandBytes"`
	Args    []string `codec:",omitempty" bound:"max=MaxActionArgs,bytes=MaxActionArgBytes"`
}

// RequestedDevice is a task's resources.device block. drover has no
// device plugins, so a job asking for a device is refused at submit.
type RequestedDevice struct {
	Name        string        `codec:",omitempty" bound:"id"`
	Count       uint64        `codec:",omitempty"`
	Constraints []*Constraint `codec:",omitempty"`
	Affinities  []*Affinity   `codec:",omitempty"`
}

// NUMAResource is a task's resources.numa block.
type NUMAResource struct {
	Affinity string   `codec:",omitempty"`
	Devices  []string `codec:",omitempty" bound:"max=MaxDevicesPerTask,bytes=MaxActionNameBytes"`
}

// DisconnectStrategy is a group's disconnect block: what happens to its
// allocations on a node that stops heartbeating.
type DisconnectStrategy struct {
	LostAfter         time.Duration  `codec:",omitempty"`
	StopOnClientAfter *time.Duration `codec:",omitempty"`
	Replace           *bool          `codec:",omitempty"`
	Reconcile         string         `codec:",omitempty" bound:"id"`
}

// ScalingPolicy is a group's scaling block, kept as Nomad stores it: the
// bounds of the group's count (which `job scale` honours) and the policy an
// autoscaler reads. Target, ID and Namespace are filled at canonicalization.
type ScalingPolicy struct {
	ID          string            `codec:",omitempty" bound:"-"`
	Namespace   string            `codec:",omitempty" bound:"-"`
	Type        string            `codec:",omitempty" bound:"id"`
	Target      map[string]string `codec:",omitempty" bound:"-"`
	Policy      map[string]any    `codec:",omitempty" bound:"blob"`
	Min         int64             `codec:",omitempty"`
	Max         int64             `codec:",omitempty"`
	Enabled     bool              `codec:",omitempty"`
	CreateIndex uint64            `codec:",omitempty"`
	ModifyIndex uint64            `codec:",omitempty"`

	// minNull: the JSON block left Min null, which the group's decoding
	// fills with its count (job_json.go); never encoded.
	minNull bool
}

// ScalingPolicyID is the ID of the policy of group in job ns/jobID: a
// UUID-shaped digest of the target, so that every version of the job
// keeps its policy's ID without a lookup and every server computes the
// same one.
func ScalingPolicyID(ns, jobID, group string) string {
	sum := sha256.Sum256([]byte(ns + "\x00" + jobID + "\x00" + group))
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

// canonicalizeBlocks fills the defaults of a group's disconnect and
// scaling blocks, as Nomad's API does.
func (tg *TaskGroup) canonicalizeBlocks(job *Job) {
	if d := tg.Disconnect; d != nil {
		if d.Replace == nil {
			t := true
			d.Replace = &t
		}
		if d.Reconcile == "" {
			d.Reconcile = ReconcileBestScore
		}
	}
	if s := tg.Scaling; s != nil {
		if s.Type == "" {
			s.Type = ScalingPolicyTypeHorizontal
		}
		s.Namespace = job.Namespace
		s.Target = map[string]string{
			ScalingTargetNamespace: job.Namespace,
			ScalingTargetJob:       job.ID,
			ScalingTargetGroup:     tg.Name,
		}
		s.ID = ScalingPolicyID(job.Namespace, job.ID, tg.Name)
	}
	for _, t := range tg.Tasks {
		if t == nil || t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if d != nil && d.Count == 0 {
				d.Count = 1
			}
		}
		if n := t.Resources.NUMA; n != nil && n.Affinity == "" {
			n.Affinity = NUMAAffinityNone
		}
	}
}

// validateBlocks checks a group's disconnect, scaling and related
// attributes. What drover cannot honour is refused by name with why.
func (tg *TaskGroup) validateBlocks(l *errList, where string) {
	tg.validateIntegrations(l, where)
	if tg.MaxClientDisconnect != nil {
		if tg.Disconnect != nil && tg.Disconnect.LostAfter != 0 {
			l.add("%s: max_client_disconnect and disconnect.lost_after must not both be set (max_client_disconnect is the deprecated form of lost_after)", where)
		}
		l.add("%s: max_client_disconnect: not supported: drover marks the allocations of a node that stops heartbeating lost and does not keep them as disconnected", where)
	}
	if tg.StopAfterClientDisconnect != nil {
		if tg.Disconnect != nil && tg.Disconnect.StopOnClientAfter != nil {
			l.add("%s: stop_after_client_disconnect and disconnect.stop_on_client_after must not both be set (stop_after_client_disconnect is the deprecated form of stop_on_client_after)", where)
		}
		l.add("%s: stop_after_client_disconnect: not supported: drover's client does not stop its allocations when it loses its servers", where)
	}
	if tg.PreventRescheduleOnLost {
		l.add("%s: prevent_reschedule_on_lost: not supported: drover replaces the allocations of a lost node and has no disconnected state to wait in", where)
	}
	if d := tg.Disconnect; d != nil {
		w := where + ": disconnect"
		switch d.Reconcile {
		case ReconcileKeepOriginal, ReconcileKeepReplacement, ReconcileBestScore, ReconcileLongestRunning, "":
		default:
			l.add("%s: reconcile must be %q, %q, %q or %q (got %q)", w,
				ReconcileBestScore, ReconcileKeepOriginal, ReconcileKeepReplacement, ReconcileLongestRunning, d.Reconcile)
		}
		if d.LostAfter < 0 {
			l.add("%s: lost_after must not be negative", w)
		} else if d.LostAfter > 0 {
			l.add("%s: lost_after: not supported: drover marks the allocations of a node that stops heartbeating lost and does not keep them as disconnected", w)
		}
		if d.StopOnClientAfter != nil {
			l.add("%s: stop_on_client_after: not supported: drover's client does not stop its allocations when it loses its servers", w)
		}
		if d.Replace != nil && !*d.Replace {
			l.add("%s: replace: false is not supported: drover always replaces the allocations of a lost node", w)
		}
	}
	if s := tg.Scaling; s != nil {
		s.validate(l, where+": scaling", tg.Count)
	}
}

func (s *ScalingPolicy) validate(l *errList, where string, count int) {
	if s.Type != "" && s.Type != ScalingPolicyTypeHorizontal {
		l.add("%s: type must be %q for a group (got %q)", where, ScalingPolicyTypeHorizontal, s.Type)
	}
	switch {
	case s.Min < 0:
		l.add("%s: min must not be negative (got %d)", where, s.Min)
	case s.Max < 0:
		l.add("%s: max must not be negative (got %d)", where, s.Max)
	case s.Min > s.Max:
		l.add("%s: min (%d) must not be greater than max (%d)", where, s.Min, s.Max)
	case int64(count) < s.Min:
		l.add("%s: the group's count (%d) must not be less than min (%d)", where, count, s.Min)
	case int64(count) > s.Max:
		l.add("%s: the group's count (%d) must not be greater than max (%d)", where, count, s.Max)
	}
	if s.Policy != nil {
		if d := ValueDepth(map[string]any(s.Policy)); d > MaxScalingPolicyDepth {
			l.add("%s: policy nests %d levels; exceeds limit of %d", where, d, MaxScalingPolicyDepth)
		} else if n := jsonSize(s.Policy); n < 0 {
			l.add("%s: policy is not encodable as JSON", where)
		} else if n > MaxScalingPolicyBytes {
			l.add("%s: policy is %d bytes encoded; exceeds limit of %d", where, n, MaxScalingPolicyBytes)
		}
	}
}

// CheckScaleCount refuses a count outside the group's scaling bounds, as
// a scaling request must stay within them.
func (tg *TaskGroup) CheckScaleCount(count int64) error {
	s := tg.Scaling
	if s == nil {
		return nil
	}
	if count < s.Min {
		return NewError(ErrInvalid, "Count: %d is less than the minimum of group %q's scaling policy (min = %d)", count, tg.Name, s.Min)
	}
	if count > s.Max {
		return NewError(ErrInvalid, "Count: %d is greater than the maximum of group %q's scaling policy (max = %d)", count, tg.Name, s.Max)
	}
	return nil
}

// validateBlocks checks a task's kind, actions and the resources drover
// cannot provide. Their sizes are bounded by their fields' bound tags
// (CheckBounds).
func (t *Task) validateBlocks(l *errList, where string) {
	t.validateIntegrations(l, where)
	if strings.HasPrefix(t.Kind, "connect-") {
		l.add("%s: kind: %q is a Consul Connect task kind, and drover has no Consul Connect integration; remove it", where, t.Kind)
	}
	{
		seen := map[string]bool{}
		for i, a := range t.Actions {
			if a == nil {
				l.add("%s: action %d: null is not allowed", where, i+1)
				continue
			}
			w := fmt.Sprintf("%s: action %q", where, a.Name)
			switch {
			case a.Name == "":
				l.add("%s: action %d: missing name", where, i+1)
			case seen[a.Name]:
				l.add("%s: defined more than once", w)
			}
			seen[a.Name] = true
			if a.Command == "" {
				l.add("%s: command is required", w)
			}
		}
	}
	r := t.Resources
	if r == nil {
		return
	}
	{
		for i, d := range r.Devices {
			if d == nil {
				l.add("%s: resources: device %d: null is not allowed", where, i+1)
				continue
			}
			if d.Name == "" {
				l.add("%s: resources: device %d: missing name", where, i+1)
				continue
			}
			l.add("%s: resources: device %q: not supported: drover has no device plugins, so no node offers devices", where, d.Name)
		}
	}
	if n := r.NUMA; n != nil && n.Affinity != NUMAAffinityNone && n.Affinity != "" {
		switch n.Affinity {
		case "prefer", "require":
			l.add("%s: resources: numa: affinity %q is not supported: drover does not place tasks by NUMA topology (affinity = %q is)", where, n.Affinity, NUMAAffinityNone)
		default:
			l.add("%s: resources: numa affinity must be %q, %q or %q (got %q)", where, NUMAAffinityNone, "prefer", "require", n.Affinity)
		}
	}
	if r.SecretsMB < 0 || r.SecretsMB > MaxSecretsMB {
		l.add("%s: resources: secrets must be between 0 and %d MB (got %d)", where, MaxSecretsMB, r.SecretsMB)
	}
}

// validate checks a job's ui block; its sizes are bounded by its fields'
// bound tags (CheckBounds).
func (u *JobUIConfig) validate(l *errList) {
	if u == nil {
		return
	}
	for i, k := range u.Links {
		if k == nil {
			l.add("ui: link %d: null is not allowed", i+1)
		}
	}
}

// jsonSize is the length of v encoded as JSON (-1 when it cannot be).
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return -1
	}
	return len(b)
}
