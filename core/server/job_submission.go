package server

import "github.com/drover-org/drover/core/structs"

// keptSubmission is the source to store with a register of job: nil when
// none was sent, or when it is larger than MaxJobSubmissionBytes, which
// Nomad does not refuse either (the job registers; its source is not kept,
// and the server says so in its log). A submission that is malformed
// (unknown format, too many variable flags) is refused.
func (ep Jobs) keptSubmission(job *structs.Job, sub *structs.JobSubmission) (*structs.JobSubmission, error) {
	if sub == nil {
		return nil, nil
	}
	if err := sub.Check(); err != nil {
		return nil, err
	}
	if size := sub.Size(); size > structs.MaxJobSubmissionBytes {
		ep.srv.logger.Warn("job source not kept: larger than the limit", "namespace", job.Namespace, "job_id", job.ID,
			"bytes", size, "limit", structs.MaxJobSubmissionBytes)
		return nil, nil
	}
	// The FSM fills in the job and version it stores it with.
	c := sub.Copy()
	c.Namespace, c.JobID, c.Version, c.JobModifyIndex = "", "", 0, 0
	return c, nil
}
