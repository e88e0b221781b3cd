package structs

import "fmt"

// The rules and defaults of this file depend on the job type. The core
// knows no type by name: each comes from the declaration of the plugin
// serving the type (Job.TypeBehavior), which the server stamps into a job
// before it canonicalizes and validates it. A job without one (checked
// client-side, before the server saw it) gets no type defaults and is held
// to no type rule; the server applies both.

// defaultRestart returns a copy of the declared restart policy of a group
// that sets none; nil without one.
func (b *JobTypeBehavior) defaultRestart() *RestartPolicy {
	if b == nil || b.DefaultRestart == nil {
		return nil
	}
	rp := *b.DefaultRestart
	return &rp
}

// defaultReschedule returns a copy of the declared reschedule policy of a
// group that sets none; nil without one, or when the type refuses the
// reschedule block (a default Validate would then refuse is no default).
func (b *JobTypeBehavior) defaultReschedule() *ReschedulePolicy {
	if b == nil || b.DefaultReschedule == nil || b.Refuses(BlockReschedule) {
		return nil
	}
	rp := *b.DefaultReschedule
	return &rp
}

// canonicalMigrate lays a group's migrate block over the type's declared
// default, field by field (a zero field is unset, as in Nomad's API where
// they are pointers): nil when the group has none and the type declares
// none or refuses the block.
func (b *JobTypeBehavior) canonicalMigrate(m *MigrateStrategy) *MigrateStrategy {
	if b == nil || b.DefaultMigrate == nil || b.Refuses(BlockMigrate) {
		return m
	}
	d := *b.DefaultMigrate
	if m == nil {
		return &d
	}
	c := *m
	if c.MaxParallel == 0 {
		c.MaxParallel = d.MaxParallel
	}
	if c.HealthCheck == "" {
		c.HealthCheck = d.HealthCheck
	}
	if c.MinHealthyTime == 0 {
		c.MinHealthyTime = d.MinHealthyTime
	}
	if c.HealthyDeadline == 0 {
		c.HealthyDeadline = d.HealthyDeadline
	}
	return &c
}

// validateTypeRules holds the job-level blocks to what its type declares.
func (j *Job) validateTypeRules(l *errList) {
	b := j.TypeBehavior
	if b == nil {
		return
	}
	if b.Refuses(BlockAffinity) && len(j.Affinities) > 0 {
		l.add("%s jobs may not have an affinity block", j.Type)
	}
	if b.Refuses(BlockSpread) && len(j.Spreads) > 0 {
		l.add("%s jobs may not have a spread block", j.Type)
	}
	if b.Refuses(BlockUpdate) && !j.Update.IsEmpty() {
		l.add("update block: not allowed for %s jobs", j.Type)
	}
	if !b.Deployments && j.Update != nil && j.Update.Canary > 0 {
		l.add("update.canary is %d, but %s jobs do not roll out through deployments (the job type's scheduler plugin does not declare deployments): canary must be 0", j.Update.Canary, j.Type)
	}
	if j.Periodic != nil && !b.AllowPeriodic {
		l.add("periodic block: not allowed for %s jobs (the job type does not allow periodic jobs)", j.Type)
	}
	if j.ParameterizedJob != nil && !b.AllowParameterized {
		l.add("parameterized block: not allowed for %s jobs (the job type does not allow parameterized jobs)", j.Type)
	}
}

// validateTypeRules holds a group to what its job's type declares.
func (tg *TaskGroup) validateTypeRules(l *errList, where, jobType string, b *JobTypeBehavior) {
	if b == nil {
		return
	}
	if limit := b.MaxGroupCount; limit > 0 && tg.Count > limit {
		per := ""
		if b.PerNode {
			per = " per node"
		}
		l.add("%s: count is %d, but %s jobs run at most %d allocation(s) of a group%s (count must be %s)",
			where, tg.Count, jobType, limit, per, countRange(limit))
	}
	if b.Refuses(BlockReschedule) && tg.ReschedulePolicy != nil {
		l.add("%s: %s jobs should not have a reschedule policy", where, jobType)
	}
	if b.Refuses(BlockUpdate) && !tg.Update.IsEmpty() {
		l.add("%s: update block not allowed for %s jobs", where, jobType)
	}
	if !b.Deployments && tg.Update != nil && tg.Update.Canary > 0 {
		l.add("%s: update.canary is %d, but %s jobs do not roll out through deployments (the job type's scheduler plugin does not declare deployments): canary must be 0", where, tg.Update.Canary, jobType)
	}
	if b.Refuses(BlockAffinity) && len(tg.Affinities) > 0 {
		l.add("%s: %s jobs may not have an affinity block", where, jobType)
	}
	if b.Refuses(BlockSpread) && len(tg.Spreads) > 0 {
		l.add("%s: %s jobs may not have a spread block", where, jobType)
	}
	if b.Refuses(BlockMigrate) && tg.Migrate != nil {
		l.add("%s: migrate block not allowed for %s jobs", where, jobType)
	}
	if tg.MaxRunDuration != nil && !b.AllowMaxRunDuration {
		l.add("%s: max_run_duration not allowed for %s jobs", where, jobType)
	}
}

func countRange(limit int) string {
	if limit == 1 {
		return "0 or 1"
	}
	return fmt.Sprintf("between 0 and %d", limit)
}
