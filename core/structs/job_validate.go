package structs

// JobValidateResponse is Nomad's answer to PUT /v1/validate/job: a job
// that fails validation is still a 200, with the reasons in
// ValidationErrors (one line each) and Error (all of them in one string).
// DriverConfigValidated reports whether task driver configs were checked
// too; drover checks them on the node that runs the task, as Nomad does,
// so it is false. Warnings are non-fatal remarks, one per line.
type JobValidateResponse struct {
	DriverConfigValidated bool
	ValidationErrors      []string
	Error                 string
	Warnings              string
}
