package structs

import "time"

// Transitional: core/jobspec and core/client still call DefaultRestartPolicy
// by job type name. The server no longer does (Canonicalize reads the
// declared JobTypeBehavior.DefaultRestart); delete this file together with
// the JobType* name constants once those callers read the declaration.

// DefaultRestartPolicy returns the restart defaults of §1.3 for a job type.
func DefaultRestartPolicy(jobType string) *RestartPolicy {
	switch jobType {
	case JobTypeService, JobTypeSystem:
		return &RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: RestartPolicyModeFail}
	default:
		return &RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: RestartPolicyModeFail}
	}
}
