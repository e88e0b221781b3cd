package structs

import (
	"bytes"
	"encoding/json"
	"time"
)

// The JSON decoding of the job blocks whose Nomad API fields are pointers:
// Nomad's CLI and API client send a job with every field its job file
// leaves unset as null, and Nomad fills each with its default while an
// explicit zero (false, 0) is kept. A Go bool or int cannot tell the two
// apart once decoded, so these blocks decode through shadow structs of
// pointers and fill the defaults of the null fields here, on the agent
// that decodes the request, before the job travels anywhere. A job that
// sends every field (drover's CLI, a job read back from the API) decodes
// unchanged. The defaults that depend on the job type are the server's
// (Job.Canonicalize with the type's declaration).

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// UnmarshalJSON decodes a job, then lays each group's update block over
// the job's, as Nomad's API does: what a group's block leaves null comes
// from the job's block (itself already filled with Nomad's defaults).
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job // no methods: no recursion
	if err := json.Unmarshal(b, (*plain)(j)); err != nil {
		return err
	}
	if j.Update == nil {
		return nil
	}
	merge := false
	for _, tg := range j.TaskGroups {
		merge = merge || (tg != nil && tg.Update != nil)
	}
	if !merge {
		return nil
	}
	var set struct {
		TaskGroups []*struct {
			Update map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return err
	}
	for i, tg := range j.TaskGroups {
		if tg == nil || tg.Update == nil || i >= len(set.TaskGroups) || set.TaskGroups[i] == nil {
			continue
		}
		tg.Update.inherit(j.Update, set.TaskGroups[i].Update)
	}
	return nil
}

// inherit takes from job each field the group's JSON block left null.
func (u *UpdateStrategy) inherit(job *UpdateStrategy, set map[string]json.RawMessage) {
	unset := func(name string) bool {
		for k, v := range set {
			// encoding/json matches field names case-insensitively.
			if bytes.EqualFold([]byte(k), []byte(name)) && !isNull(v) {
				return false
			}
		}
		return true
	}
	if unset("Stagger") {
		u.Stagger = job.Stagger
	}
	if unset("MaxParallel") {
		u.MaxParallel = job.MaxParallel
	}
	if unset("HealthCheck") {
		u.HealthCheck = job.HealthCheck
	}
	if unset("MinHealthyTime") {
		u.MinHealthyTime = job.MinHealthyTime
	}
	if unset("HealthyDeadline") {
		u.HealthyDeadline = job.HealthyDeadline
	}
	if unset("ProgressDeadline") {
		u.ProgressDeadline = job.ProgressDeadline
	}
	if unset("AutoRevert") {
		u.AutoRevert = job.AutoRevert
	}
	if unset("AutoPromote") {
		u.AutoPromote = job.AutoPromote
	}
	if unset("Canary") {
		u.Canary = job.Canary
	}
}

// UnmarshalJSON decodes an update block, a null field taking Nomad's
// default (DefaultUpdateStrategy).
func (u *UpdateStrategy) UnmarshalJSON(b []byte) error {
	var in struct {
		Stagger          *time.Duration
		MaxParallel      *int
		HealthCheck      *string
		MinHealthyTime   *time.Duration
		HealthyDeadline  *time.Duration
		ProgressDeadline *time.Duration
		AutoRevert       *bool
		AutoPromote      *bool
		Canary           *int
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	d := DefaultUpdateStrategy()
	*u = UpdateStrategy{
		Stagger:          orDefault(in.Stagger, d.Stagger),
		MaxParallel:      orDefault(in.MaxParallel, d.MaxParallel),
		HealthCheck:      orDefault(in.HealthCheck, d.HealthCheck),
		MinHealthyTime:   orDefault(in.MinHealthyTime, d.MinHealthyTime),
		HealthyDeadline:  orDefault(in.HealthyDeadline, d.HealthyDeadline),
		ProgressDeadline: orDefault(in.ProgressDeadline, d.ProgressDeadline),
		AutoRevert:       orDefault(in.AutoRevert, d.AutoRevert),
		AutoPromote:      orDefault(in.AutoPromote, d.AutoPromote),
		Canary:           orDefault(in.Canary, d.Canary),
	}
	return nil
}

// UnmarshalJSON decodes a periodic block: a null Enabled is true, as in
// Nomad (writing a periodic block means "run it"); an explicit false
// stays.
func (p *PeriodicConfig) UnmarshalJSON(b []byte) error {
	type plain PeriodicConfig
	var in struct {
		plain
		Enabled *bool
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*p = PeriodicConfig(in.plain)
	p.Enabled = orDefault(in.Enabled, true)
	return nil
}

// UnmarshalJSON decodes an ephemeral_disk block: a null SizeMB is Nomad's
// 300 MB.
func (e *EphemeralDisk) UnmarshalJSON(b []byte) error {
	type plain EphemeralDisk
	var in struct {
		plain
		SizeMB *int
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*e = EphemeralDisk(in.plain)
	e.SizeMB = orDefault(in.SizeMB, DefaultEphemeralDiskMB)
	return nil
}

// UnmarshalJSON decodes an affinity: a null Weight is Nomad's 50.
func (a *Affinity) UnmarshalJSON(b []byte) error {
	type plain Affinity
	var in struct {
		plain
		Weight *int8
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*a = Affinity(in.plain)
	a.Weight = orDefault(in.Weight, DefaultAffinityWeight)
	return nil
}

// UnmarshalJSON decodes a spread: a null Weight is Nomad's 50.
func (sp *Spread) UnmarshalJSON(b []byte) error {
	type plain Spread
	var in struct {
		plain
		Weight *int8
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*sp = Spread(in.plain)
	sp.Weight = orDefault(in.Weight, DefaultSpreadWeight)
	return nil
}

// Nomad's defaults of the fields above.
const (
	DefaultEphemeralDiskMB = 300
	DefaultAffinityWeight  = 50
	DefaultSpreadWeight    = 50
)

func orDefault[T any](p *T, d T) T {
	if p == nil {
		return d
	}
	return *p
}

// nullFields is a set of the fields of a policy block that its JSON left
// null, by position in the shadow struct that decoded it.
type nullFields uint16

func nullsOf(ptrs ...bool) nullFields {
	var n nullFields
	for i, isNil := range ptrs {
		if isNil {
			n |= 1 << i
		}
	}
	return n
}

func (n nullFields) has(i int) bool { return n&(1<<i) != 0 }

// UnmarshalJSON decodes a restart block, remembering its null fields:
// Nomad takes them from the job type's default policy (for a group) or
// from the group's policy (for a task), which FillNullPolicies does once
// the type is known.
func (r *RestartPolicy) UnmarshalJSON(b []byte) error {
	var in struct {
		Attempts        *int
		Interval        *time.Duration
		Delay           *time.Duration
		Mode            *string
		RenderTemplates *bool
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = RestartPolicy{
		Attempts: orDefault(in.Attempts, 0), Interval: orDefault(in.Interval, 0),
		Delay: orDefault(in.Delay, 0), Mode: orDefault(in.Mode, ""),
		RenderTemplates: orDefault(in.RenderTemplates, false),
		null:            nullsOf(in.Attempts == nil, in.Interval == nil, in.Delay == nil, in.Mode == nil, in.RenderTemplates == nil),
	}
	return nil
}

// fill sets each null field from d (when d is not nil) and forgets the
// nulls.
func (r *RestartPolicy) fill(d *RestartPolicy) {
	if r == nil {
		return
	}
	n := r.null
	r.null = 0
	if d == nil || n == 0 {
		return
	}
	if n.has(0) {
		r.Attempts = d.Attempts
	}
	if n.has(1) {
		r.Interval = d.Interval
	}
	if n.has(2) {
		r.Delay = d.Delay
	}
	if n.has(3) {
		r.Mode = d.Mode
	}
	if n.has(4) {
		r.RenderTemplates = d.RenderTemplates
	}
}

// UnmarshalJSON decodes a reschedule block, remembering its null fields,
// which FillNullPolicies takes from the job type's default policy.
func (r *ReschedulePolicy) UnmarshalJSON(b []byte) error {
	var in struct {
		Attempts      *int
		Interval      *time.Duration
		Delay         *time.Duration
		DelayFunction *string
		MaxDelay      *time.Duration
		Unlimited     *bool
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = ReschedulePolicy{
		Attempts: orDefault(in.Attempts, 0), Interval: orDefault(in.Interval, 0),
		Delay: orDefault(in.Delay, 0), DelayFunction: orDefault(in.DelayFunction, ""),
		MaxDelay: orDefault(in.MaxDelay, 0), Unlimited: orDefault(in.Unlimited, false),
		null: nullsOf(in.Attempts == nil, in.Interval == nil, in.Delay == nil, in.DelayFunction == nil,
			in.MaxDelay == nil, in.Unlimited == nil),
	}
	return nil
}

func (r *ReschedulePolicy) fill(d *ReschedulePolicy) {
	if r == nil {
		return
	}
	n := r.null
	r.null = 0
	if d == nil || n == 0 {
		return
	}
	if n.has(0) {
		r.Attempts = d.Attempts
	}
	if n.has(1) {
		r.Interval = d.Interval
	}
	if n.has(2) {
		r.Delay = d.Delay
	}
	if n.has(3) {
		r.DelayFunction = d.DelayFunction
	}
	if n.has(4) {
		r.MaxDelay = d.MaxDelay
	}
	if n.has(5) {
		r.Unlimited = d.Unlimited
	}
}

// FillNullPolicies fills the fields a JSON-decoded job's restart and
// reschedule blocks left null, as Nomad does: a group's from the
// policies b (the declaration of the plugin serving the job's type)
// declares, a task's restart from its group's. It must run on the job as
// decoded, before any Copy (which does not keep the nulls); a job whose
// blocks were not decoded from JSON is unchanged.
func (j *Job) FillNullPolicies(b *JobTypeBehavior) {
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		tg.RestartPolicy.fill(b.defaultRestart())
		tg.ReschedulePolicy.fill(b.defaultReschedule())
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			base := tg.RestartPolicy
			if base == nil {
				base = b.defaultRestart()
			}
			t.RestartPolicy.fill(base)
		}
	}
}

// UnmarshalJSON decodes a scaling block: a null Enabled is true, as in
// Nomad; a null Min is the group's count (TaskGroup.UnmarshalJSON).
func (p *ScalingPolicy) UnmarshalJSON(b []byte) error {
	type plain ScalingPolicy
	var in struct {
		plain
		Enabled *bool
		Min     *int64
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*p = ScalingPolicy(in.plain)
	p.Enabled = orDefault(in.Enabled, true)
	p.Min, p.minNull = orDefault(in.Min, 0), in.Min == nil
	return nil
}
