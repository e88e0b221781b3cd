package structs

import "fmt"

// MaxJobSubmissionBytes bounds a job's stored source: the source, its
// variables file and its -var flags together. Nomad's default
// job_max_source_size is 1 MB, and a larger submission is not refused:
// the job registers and its source is not kept (the server logs it).
const MaxJobSubmissionBytes = 1 << 20

// Submission formats, as Nomad's CLI sends them.
const (
	JobSubmissionFormatHCL1 = "hcl1"
	JobSubmissionFormatHCL2 = "hcl2"
	JobSubmissionFormatJSON = "json"
)

// JobSubmission is a job's source as submitted (Nomad's JobSubmission): the
// HCL or JSON text, the variables file and the -var flags it was parsed
// with. It is kept beside the job version it produced (GET
// /v1/job/<id>/submission?version=N) while that version is kept.
type JobSubmission struct {
	Source        string            `codec:",omitempty"`
	Format        string            `codec:",omitempty"`
	VariableFlags map[string]string `codec:",omitempty"`
	Variables     string            `codec:",omitempty"`

	// Set by the FSM from the version the register stored.
	Namespace      string `codec:",omitempty"`
	JobID          string `codec:",omitempty"`
	Version        uint64
	JobModifyIndex uint64 `codec:",omitempty"`
}

// Size is the submission's size against MaxJobSubmissionBytes.
func (s *JobSubmission) Size() int {
	n := len(s.Source) + len(s.Variables) + len(s.Format)
	for k, v := range s.VariableFlags {
		n += len(k) + len(v)
	}
	return n
}

// Check refuses a submission drover cannot store as given: an unknown
// format, or more variable flags than MaxEntries. Its size is not checked
// here (see MaxJobSubmissionBytes).
func (s *JobSubmission) Check() error {
	switch s.Format {
	case "", JobSubmissionFormatHCL1, JobSubmissionFormatHCL2, JobSubmissionFormatJSON:
	default:
		return NewError(ErrInvalid, "Submission.Format: %q is not %q, %q or %q", s.Format, JobSubmissionFormatHCL2, JobSubmissionFormatJSON, JobSubmissionFormatHCL1)
	}
	if len(s.VariableFlags) > MaxEntries {
		return NewError(ErrInvalid, "Submission.VariableFlags: %d flags, more than %d", len(s.VariableFlags), MaxEntries)
	}
	return nil
}

// Copy returns a deep copy.
func (s *JobSubmission) Copy() *JobSubmission {
	if s == nil {
		return nil
	}
	c := *s
	if s.VariableFlags != nil {
		c.VariableFlags = make(map[string]string, len(s.VariableFlags))
		for k, v := range s.VariableFlags {
			c.VariableFlags[k] = v
		}
	}
	return &c
}

// String names the submission in logs, without its content.
func (s *JobSubmission) String() string {
	return fmt.Sprintf("submission of job %q version %d (%d bytes)", s.JobID, s.Version, s.Size())
}
