package structs

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// ValidationError lists every rule a submitted object breaks. Each entry
// names the field and the rule, e.g. `group "g": restart: interval must be at
// least 5s (got 1s)`.
type ValidationError struct {
	Errors []string
}

func (e *ValidationError) Error() string {
	if len(e.Errors) == 1 {
		return e.Errors[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors occurred:", len(e.Errors))
	for _, m := range e.Errors {
		b.WriteString("\n\t* ")
		b.WriteString(m)
	}
	return b.String()
}

type errList struct{ errs []string }

func (l *errList) add(format string, args ...any) {
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: l.errs}
}

// Canonicalize fills the defaults of a submitted job in place. It is
// idempotent. The defaults that depend on the job type (a group's restart
// and reschedule policies) come from j.TypeBehavior; without one (a job not
// yet seen by the server) they stay unset, and the server fills them once
// it has stamped the serving plugin's declaration.
func (j *Job) Canonicalize() {
	if j.Namespace == "" {
		j.Namespace = DefaultNamespace
	}
	if j.Region == "" {
		j.Region = DefaultRegion
	}
	if j.Name == "" {
		j.Name = j.ID
	}
	if j.Type == "" {
		j.Type = DefaultJobType
	}
	if j.Priority == 0 {
		j.Priority = JobDefaultPriority
	}
	if len(j.Datacenters) == 0 {
		j.Datacenters = []string{"*"}
	}
	if j.NodePool == "" {
		j.NodePool = NodePoolDefault
	}
	if p := j.Periodic; p != nil {
		if p.SpecType == "" {
			p.SpecType = PeriodicSpecCron
		}
		if p.TimeZone == "" {
			p.TimeZone = "UTC"
		}
	}
	if p := j.ParameterizedJob; p != nil && p.Payload == "" {
		p.Payload = DispatchPayloadOptional
	}
	// A job of a type that rolls out through deployments takes Nomad's
	// default update block when it sets none (Nomad's service jobs, whose
	// API canonicalization does this), and its groups with it: each
	// update then runs as a deployment.
	if j.Update == nil && j.TypeBehavior != nil && j.TypeBehavior.Deployments && !j.TypeBehavior.Refuses(BlockUpdate) {
		j.Update = DefaultUpdateStrategy()
	}
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue // refused by Validate
		}
		// A type that takes no reschedule block has no policy to keep:
		// an all-zero one (as Nomad writes out a sysbatch group's, and
		// takes back) is no block and is dropped; any other is refused by
		// Validate.
		if tg.ReschedulePolicy.isZero() && j.TypeBehavior.Refuses(BlockReschedule) {
			tg.ReschedulePolicy = nil
		}
		if tg.RestartPolicy == nil {
			tg.RestartPolicy = j.TypeBehavior.defaultRestart()
		}
		if tg.ReschedulePolicy == nil {
			tg.ReschedulePolicy = j.TypeBehavior.defaultReschedule()
		}
		tg.Migrate = j.TypeBehavior.canonicalMigrate(tg.Migrate)
		// A group without an update block takes the job's, as Nomad's
		// canonicalization does (the HCL parser already copies it; a job
		// sent as JSON comes here with the job's block alone), unless the
		// type refuses the block.
		if tg.Update == nil && !j.Update.IsEmpty() && j.TypeBehavior != nil && !j.TypeBehavior.Refuses(BlockUpdate) {
			u := *j.Update
			tg.Update = &u
		}
		if tg.EphemeralDisk == nil {
			tg.EphemeralDisk = &EphemeralDisk{SizeMB: 300}
		}
		tg.canonicalizeServices(j.Name)
		tg.canonicalizeBlocks(j)
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			if t.CSIPluginConfig != nil {
				t.CSIPluginConfig.canonicalize()
			}
			for _, a := range t.Artifacts {
				if a != nil {
					a.Canonicalize()
				}
			}
			for _, m := range t.VolumeMounts {
				if m != nil && m.PropagationMode == "" {
					m.PropagationMode = "private"
				}
			}
			for _, tm := range t.Templates {
				if tm != nil {
					tm.Canonicalize()
				}
			}
			if t.Resources == nil {
				t.Resources = &Resources{}
			}
			if t.Resources.CPU == 0 && t.Resources.Cores == 0 {
				t.Resources.CPU = 100
			}
			if t.Resources.MemoryMB == 0 {
				t.Resources.MemoryMB = 300
			}
			if t.RestartPolicy == nil && tg.RestartPolicy != nil {
				rp := *tg.RestartPolicy
				t.RestartPolicy = &rp
			}
			if t.KillTimeout == 0 {
				t.KillTimeout = 5 * time.Second
			}
			if t.LogConfig == nil {
				t.LogConfig = &LogConfig{MaxFiles: 10, MaxFileSizeMB: 10}
			}
			// A field left out of a JSON logs block is 0, which Nomad's
			// client fills with its default; negatives stay, for Validate.
			if t.LogConfig.MaxFiles == 0 {
				t.LogConfig.MaxFiles = 10
			}
			if t.LogConfig.MaxFileSizeMB == 0 {
				t.LogConfig.MaxFileSizeMB = 10
			}
		}
	}
}

// Validate checks a canonicalized job against every rule drover enforces at
// submit time. The rules that depend on the job type come from
// j.TypeBehavior and are skipped without one (validate_jobtype.go). It does
// not check the job type against the served scheduler types or the drivers
// against the known drivers; the server does that.
func (j *Job) Validate() error {
	// The bounds first, and alone: the other rules quote the values they
	// refuse, which must not echo a megabyte back.
	if err := j.CheckBounds(); err != nil {
		return err
	}
	var l errList
	switch {
	case j.ID == "":
		l.add("job ID: missing")
	case badJobIDChar(j.ID) != "":
		l.add("job ID %q: must not contain %s", j.ID, badJobIDChar(j.ID))
	}
	if j.Name == "" {
		l.add("job name: missing")
	}
	if j.Type == "" {
		l.add("job type: missing")
	}
	if j.Priority < JobMinPriority || j.Priority > JobMaxPriority {
		l.add("job priority %d: must be between %d and %d", j.Priority, JobMinPriority, JobMaxPriority)
	}
	if len(j.Datacenters) == 0 {
		l.add("datacenters: at least one datacenter is required")
	}
	for _, dc := range j.Datacenters {
		if dc == "" {
			l.add("datacenters: an empty datacenter name is not allowed")
		}
	}
	for i, c := range j.Constraints {
		validateConstraint(&l, fmt.Sprintf("job constraint %d", i+1), c)
	}
	validateAffinities(&l, "job affinity", j.Affinities)
	validateSpreads(&l, "job", j.Spreads)
	j.validateTypeRules(&l)
	j.UI.validate(&l)
	j.validateIntegrations(&l)
	if j.Periodic != nil {
		j.Periodic.validate(&l)
	}
	if j.ParameterizedJob != nil {
		j.ParameterizedJob.validate(&l)
	}
	if len(j.TaskGroups) == 0 {
		l.add("job %q: at least one group is required", j.ID)
	}
	seen := map[string]bool{}
	for i, tg := range j.TaskGroups {
		if tg == nil {
			l.add("group %d: null is not allowed (TaskGroups[%d])", i+1, i)
			continue
		}
		name := tg.Name
		if name == "" {
			l.add("group %d: missing name", i+1)
		} else if seen[name] {
			l.add("group %q: defined more than once", name)
		}
		seen[name] = true
		tg.validate(&l, j.Type, j.TypeBehavior)
	}
	return l.err()
}

// IsEmpty reports whether the update block sets nothing (the Nomad API
// client sends an all-zero block for every job).
func (u *UpdateStrategy) IsEmpty() bool { return u == nil || *u == UpdateStrategy{} }

func (tg *TaskGroup) validate(l *errList, jobType string, b *JobTypeBehavior) {
	where := fmt.Sprintf("group %q", tg.Name)
	if tg.Count < 0 {
		l.add("%s: count must not be negative (got %d)", where, tg.Count)
	}
	tg.validateTypeRules(l, where, jobType, b)
	tg.Update.validate(l, where)
	tg.Migrate.validate(l, where)
	switch {
	case tg.RestartPolicy == nil && b != nil:
		// Canonicalize fills it from the declaration; a type that declares
		// no default leaves it to each job.
		l.add("%s: missing restart policy (%s jobs declare no default restart policy)", where, jobType)
	case tg.RestartPolicy != nil:
		tg.RestartPolicy.validate(l, where+": restart")
	}
	if tg.ReschedulePolicy != nil && !b.Refuses(BlockReschedule) {
		tg.ReschedulePolicy.validate(l, where+": reschedule")
	}
	if tg.EphemeralDisk == nil {
		l.add("%s: missing ephemeral disk", where)
	} else if tg.EphemeralDisk.SizeMB < 0 {
		l.add("%s: ephemeral_disk size must not be negative", where)
	}
	for i, c := range tg.Constraints {
		validateConstraint(l, fmt.Sprintf("%s: constraint %d", where, i+1), c)
	}
	validateAffinities(l, where+": affinity", tg.Affinities)
	validateSpreads(l, where, tg.Spreads)
	if len(tg.Tasks) == 0 {
		l.add("%s: at least one task is required", where)
	}
	tasks := map[string]bool{}
	leaders := 0
	for i, t := range tg.Tasks {
		if t == nil {
			l.add("%s: task %d: null is not allowed (Tasks[%d])", where, i+1, i)
			continue
		}
		if t.Name == "" {
			l.add("%s: task %d: missing name", where, i+1)
		} else if why := badTaskName(t.Name); why != "" {
			l.add("%s: task %q: name %s", where, t.Name, why)
		} else if tasks[t.Name] {
			l.add("%s: task %q: defined more than once", where, t.Name)
		}
		tasks[t.Name] = true
		if t.Leader {
			leaders++
		}
		t.validate(l, fmt.Sprintf("%s: task %q", where, t.Name))
		t.validateBlocks(l, fmt.Sprintf("%s: task %q", where, t.Name))
		t.validateLogs(l, fmt.Sprintf("%s: task %q: logs", where, t.Name), tg.EphemeralDisk)
	}
	if leaders > 1 {
		l.add("%s: only one task may be the leader (found %d)", where, leaders)
	}
	tg.validateVolumes(l, where)
	tg.validateNetworks(l, where)
	tg.validateServices(l, where)
	tg.validateBlocks(l, where)
}

func (t *Task) validate(l *errList, where string) {
	if t.Driver == "" {
		l.add("%s: missing driver", where)
	}
	if t.KillTimeout < 0 {
		l.add("%s: kill_timeout must not be negative", where)
	}
	if t.Config != nil {
		if d := ValueDepth(t.Config); d > MaxTaskConfigDepth {
			l.add("%s: config nests %d levels; exceeds limit %s (a task config may nest %d)", where, d, DepthLimit(), MaxTaskConfigDepth)
		}
	}
	if r := t.Resources; r != nil {
		if r.CPU < 0 || r.Cores < 0 {
			l.add("%s: resources: cpu and cores must not be negative", where)
		}
		if r.MemoryMB < 10 {
			l.add("%s: resources: memory must be at least 10 MB (got %d)", where, r.MemoryMB)
		}
		if r.MemoryMaxMB != 0 && r.MemoryMaxMB < r.MemoryMB {
			l.add("%s: resources: memory_max (%d) must not be below memory (%d)", where, r.MemoryMaxMB, r.MemoryMB)
		}
	}
	if t.RestartPolicy != nil {
		t.RestartPolicy.validate(l, where+": restart")
	}
	for i, c := range t.Constraints {
		validateConstraint(l, fmt.Sprintf("%s: constraint %d", where, i+1), c)
	}
	validateAffinities(l, where+": affinity", t.Affinities)
	t.validateFiles(l, where)
	if dp := t.DispatchPayload; dp != nil {
		if dp.File == "" {
			l.add("%s: dispatch_payload: file is required", where)
		} else if filepath.IsAbs(dp.File) || strings.HasPrefix(filepath.Clean(dp.File), "..") {
			l.add("%s: dispatch_payload: file %q must be a relative path inside the task's local/ directory", where, dp.File)
		}
	}
}

// validateLogs holds the logs block to what the driver can rotate (it
// takes at least one file of at least 1 MB, and 32-bit counts), and, as
// Nomad does, the logs to less than the group's ephemeral disk: values
// the client could not honour would otherwise fail or be replaced there.
func (t *Task) validateLogs(l *errList, where string, disk *EphemeralDisk) {
	lc := t.LogConfig
	if lc == nil {
		return
	}
	ok := true
	if lc.MaxFiles < 1 || lc.MaxFiles > math.MaxInt32 {
		l.add("%s: max_files must be between 1 and %d (got %d)", where, math.MaxInt32, lc.MaxFiles)
		ok = false
	}
	if lc.MaxFileSizeMB < 1 || lc.MaxFileSizeMB > math.MaxInt32 {
		l.add("%s: max_file_size must be between 1 and %d MB (got %d)", where, math.MaxInt32, lc.MaxFileSizeMB)
		ok = false
	}
	if !ok || lc.Disabled || disk == nil {
		return
	}
	if usage := int64(lc.MaxFiles) * int64(lc.MaxFileSizeMB); int64(disk.SizeMB) <= usage {
		l.add("%s: log storage (%d files of %d MB = %d MB) must be less than the group's ephemeral_disk (%d MB)",
			where, lc.MaxFiles, lc.MaxFileSizeMB, usage, disk.SizeMB)
	}
}

// Bounds of a reschedule block, so that what a scheduler derives from it
// stays within what the core accepts of a plan: a follow-up eval is due at
// most MaxRescheduleDelay ahead, and a new alloc's tracker holds at most
// MaxRescheduleAttempts events.
const (
	MaxRescheduleDelay    = 365 * 24 * time.Hour
	MaxRescheduleAttempts = 1024
)

// isZero reports whether r is set with every field zero (nil is not).
func (r *ReschedulePolicy) isZero() bool {
	return r != nil && r.Attempts == 0 && r.Interval == 0 && r.Delay == 0 && r.DelayFunction == "" &&
		r.MaxDelay == 0 && !r.Unlimited
}

// validate checks a reschedule block: Nomad's delay functions, no negative
// durations, max_delay not below delay, and the bounds above. An empty
// delay_function is constant. Nomad's 5s floor on delay is not enforced:
// the scheduler paces reschedules by the delay given.
func (r *ReschedulePolicy) validate(l *errList, where string) {
	switch r.DelayFunction {
	case "", "constant", "exponential", "fibonacci":
	default:
		l.add("%s: delay_function %q is not valid (must be \"constant\", \"exponential\" or \"fibonacci\")", where, r.DelayFunction)
	}
	if r.Attempts < 0 || r.Attempts > MaxRescheduleAttempts {
		l.add("%s: attempts must be between 0 and %d (got %d); use unlimited = true for more", where, MaxRescheduleAttempts, r.Attempts)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"interval", r.Interval}, {"delay", r.Delay}, {"max_delay", r.MaxDelay}} {
		if d.v < 0 {
			l.add("%s: %s must not be negative (got %s)", where, d.name, d.v)
		}
	}
	if r.Delay > MaxRescheduleDelay || r.MaxDelay > MaxRescheduleDelay {
		l.add("%s: delay and max_delay must be at most %s", where, MaxRescheduleDelay)
	}
	if r.MaxDelay > 0 && r.MaxDelay < r.Delay {
		l.add("%s: max_delay (%s) must not be less than delay (%s)", where, r.MaxDelay, r.Delay)
	}
}

func (r *RestartPolicy) validate(l *errList, where string) {
	switch r.Mode {
	case RestartPolicyModeDelay, RestartPolicyModeFail:
	default:
		l.add("%s: mode %q is not valid (must be %q or %q)", where, r.Mode, RestartPolicyModeDelay, RestartPolicyModeFail)
	}
	if r.Attempts < 0 {
		l.add("%s: attempts must not be negative", where)
	}
	if r.Attempts == 0 && r.Mode != RestartPolicyModeFail {
		l.add("%s: attempts = 0 is only allowed with mode = %q", where, RestartPolicyModeFail)
	}
	if r.Interval < 5*time.Second {
		l.add("%s: interval must be at least 5s (got %s)", where, r.Interval)
	}
	if r.Delay < 0 {
		l.add("%s: delay must not be negative", where)
	}
	if time.Duration(r.Attempts)*r.Delay > r.Interval {
		l.add("%s: attempts × delay (%d × %s) must not exceed interval (%s)", where, r.Attempts, r.Delay, r.Interval)
	}
}

var validOperands = map[string]bool{
	"=": true, "==": true, "is": true, "!=": true, "not": true, "<": true, "<=": true, ">": true, ">=": true,
	"regexp": true, "version": true, "semver": true, "set_contains": true, "set_contains_all": true,
	"set_contains_any": true, "distinct_hosts": true, "distinct_property": true, "is_set": true, "is_not_set": true,
}

func validateConstraint(l *errList, where string, c *Constraint) {
	if c == nil {
		l.add("%s: null is not allowed", where)
		return
	}
	if !validOperands[c.Operand] {
		l.add("%s: unknown operator %q", where, c.Operand)
		return
	}
	switch c.Operand {
	case "distinct_hosts", "is_set", "is_not_set":
	case "distinct_property":
		if c.LTarget == "" {
			l.add("%s: distinct_property needs an attribute", where)
		}
		if c.RTarget != "" {
			if n, err := strconv.ParseUint(c.RTarget, 10, 64); err != nil || n < 1 {
				l.add("%s: distinct_property value %s must be a count of at least 1", where, shortQuote(c.RTarget))
			}
		}
	default:
		if c.LTarget == "" && c.RTarget == "" {
			l.add("%s: attribute and value are both empty", where)
		}
	}
	// The right-hand sides the scheduler compiles are compiled here, so
	// that a typo is refused at submit rather than filter every node. A
	// value read from the node (${meta.v}) is checked when it is read.
	literal := feasible.ParseTarget(c.RTarget).Literal()
	switch c.Operand {
	case "regexp":
		if !literal {
			break
		}
		if _, err := regexp.Compile(c.RTarget); err != nil {
			l.add("%s: regexp %s does not compile: %v", where, shortQuote(c.RTarget), err)
		}
	case "version", "semver":
		if !literal {
			break
		}
		if err := feasible.CheckVersionConstraint(c.RTarget, c.Operand == "semver"); err != nil {
			l.add("%s: %s constraint %s is invalid (expected e.g. \">= 1.2, < 2.0\"): %v", where, c.Operand, shortQuote(c.RTarget), err)
		}
	case "set_contains", "set_contains_all", "set_contains_any":
		if strings.TrimSpace(c.RTarget) == "" {
			l.add("%s: %s needs a value: a comma-separated list of the items the attribute must contain", where, c.Operand)
		}
	}
}

// validateNoNil refuses null elements of a list the server reads element
// by element.
func validateNoNil[T any](l *errList, what string, list []*T) {
	for i, x := range list {
		if x == nil {
			l.add("%s %d: null is not allowed", what, i+1)
		}
	}
}

func validateSpreads(l *errList, where string, spreads []*Spread) {
	validateNoNil(l, where+" spread", spreads)
	for i, sp := range spreads {
		if sp != nil {
			validateNoNil(l, fmt.Sprintf("%s spread %d: target", where, i+1), sp.SpreadTarget)
		}
	}
	validateSpreadRules(l, where, spreads)
}

func (p *PeriodicConfig) validate(l *errList) {
	specs := p.AllSpecs()
	if len(specs) == 0 {
		l.add("periodic block: a cron or crons expression is required")
	}
	if p.Spec != "" && len(p.Specs) > 0 {
		l.add("periodic block: set cron or crons, not both")
	}
	if p.SpecType != PeriodicSpecCron {
		l.add("periodic block: unknown spec type %q", p.SpecType)
	}
	for _, s := range specs {
		if _, err := ParseCron(s); err != nil {
			l.add("periodic block: invalid cron expression %q: %v", s, err)
		}
	}
	if _, err := time.LoadLocation(p.TimeZone); err != nil {
		l.add("periodic block: invalid time_zone %q: %v", p.TimeZone, err)
	}
}

func (p *ParameterizedJobConfig) validate(l *errList) {
	switch p.Payload {
	case DispatchPayloadOptional, DispatchPayloadRequired, DispatchPayloadForbidden:
	default:
		l.add("parameterized block: payload %q is not valid (must be optional, required or forbidden)", p.Payload)
	}
	req := map[string]bool{}
	for _, k := range p.MetaRequired {
		req[k] = true
	}
	for _, k := range p.MetaOptional {
		if req[k] {
			l.add("parameterized block: meta key %q is both required and optional", k)
		}
	}
}

// Next returns the earliest launch strictly after from, evaluated in the
// configured time zone. It returns the zero time when no spec ever fires.
func (p *PeriodicConfig) Next(from time.Time) (time.Time, error) {
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil {
		return time.Time{}, err
	}
	var best time.Time
	for _, s := range p.AllSpecs() {
		sched, err := ParseCron(s)
		if err != nil {
			return time.Time{}, err
		}
		n := sched.Next(from.In(loc))
		if !n.IsZero() && (best.IsZero() || n.Before(best)) {
			best = n
		}
	}
	return best, nil
}

// badTaskName says why a task name cannot be used, empty when it can. The
// client makes the name a directory of the allocation (next to the shared
// alloc/), so a name that is a path or a special element would escape it
// or collide, and fail the task on every node; Nomad refuses slashes too.
func badTaskName(name string) string {
	switch {
	case strings.ContainsAny(name, `/\`):
		return "must not contain slashes"
	case strings.ContainsRune(name, 0):
		return "must not contain NUL characters"
	case name == "." || name == "..":
		return "must not be . or .."
	case name == "alloc":
		return `must not be "alloc", the allocation's shared directory`
	}
	return ""
}

// badIDChar describes the first character an object ID must not hold:
// spaces and other white space (a newline would split the CLI's tables and
// the log lines that name the ID), NUL and other control characters.
// Empty when id is clean.
func badIDChar(id string) string {
	for _, r := range id {
		switch {
		case r == 0:
			return "NUL characters"
		case r == ' ':
			return "spaces"
		case unicode.IsSpace(r):
			return fmt.Sprintf("white space (%q)", r)
		case unicode.IsControl(r):
			return fmt.Sprintf("control characters (%q)", r)
		}
	}
	return ""
}

// badJobIDChar is badIDChar for a registered job's ID, with Nomad's rule:
// only spaces and NUL are refused, so that a job Nomad accepts (its API
// tests register "job-id/with\\troublesome:characters\n?&字") registers
// here too; the API routes take the ID path-escaped.
func badJobIDChar(id string) string {
	switch {
	case strings.ContainsRune(id, 0):
		return "NUL characters"
	case strings.ContainsRune(id, ' '):
		return "spaces"
	}
	return ""
}

// ValidateDispatchIDs checks a dispatch's IdPrefixTemplate and the child ID
// built from it: the prefix may not hold spaces, NUL, newlines or other
// control characters, nor "/" (which separates a child's ID from its
// parent's); the child ID follows the job ID rule (no spaces or NUL), so a
// child inherits whatever its parent's ID holds, as in Nomad.
func ValidateDispatchIDs(prefixTemplate, childID string) error {
	var l errList
	if bad := badIDChar(prefixTemplate); bad != "" {
		l.add("IdPrefixTemplate %q: must not contain %s", prefixTemplate, bad)
	} else if strings.Contains(prefixTemplate, "/") {
		l.add("IdPrefixTemplate %q: must not contain \"/\"", prefixTemplate)
	}
	if bad := badJobIDChar(childID); bad != "" && len(l.errs) == 0 {
		l.add("dispatched job ID %q: must not contain %s", childID, bad)
	}
	return l.err()
}
