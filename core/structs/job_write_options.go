package structs

// JobRegisterOptions are what a job registration asks beyond the job
// itself (Nomad's JobRegisterRequest fields).
type JobRegisterOptions struct {
	// EnforceIndex registers only when the stored job's JobModifyIndex is
	// JobModifyIndex (0: the job must not exist).
	EnforceIndex   bool
	JobModifyIndex uint64
	// Submission is the job's source as submitted, kept with the version.
	Submission *JobSubmission
	// EvalPriority is the priority of the eval the register creates; 0
	// means the job's own priority.
	EvalPriority int
	// PreserveCounts keeps the count of every group the stored job has
	// already; a new group takes the count the job gives it.
	PreserveCounts bool
}

// JobDeregisterOptions are what a job deregistration asks beyond the job's
// name (Nomad's `?purge=` and `?eval_priority=`).
type JobDeregisterOptions struct {
	Purge bool
	// EvalPriority is the priority of the eval the deregister creates; 0
	// means the job's own priority.
	EvalPriority int
}

// CheckEvalPriority refuses an eval priority outside the job priority
// range; 0 (unset) is allowed.
func CheckEvalPriority(p int) error {
	if p != 0 && (p < JobMinPriority || p > JobMaxPriority) {
		return NewError(ErrInvalid, "EvalPriority %d: must be between %d and %d (0 uses the job's priority)", p, JobMinPriority, JobMaxPriority)
	}
	return nil
}
