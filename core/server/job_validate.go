package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// Validate checks a job as Register would (its type is served by a
// plugin, the job is valid once canonicalized, its namespace and node pool
// exist, its drivers are known, its allocations fit the per-job limit)
// without writing anything. A refusal is the answer's ValidationErrors,
// not an error: the error is kept for failures to check at all (state
// reads). It reads local state, so a follower answers it itself.
func (ep Jobs) Validate(_ context.Context, in *structs.Job) (*structs.JobValidateResponse, error) {
	if in == nil {
		return nil, structs.NewError(structs.ErrInvalid, "Job: missing job")
	}
	resp := &structs.JobValidateResponse{}
	job, err := ep.prepare(in)
	if err == nil {
		err = ep.checkDrivers(job)
	}
	if err == nil {
		err = ep.checkAllocLimit(job)
	}
	if err == nil {
		return resp, nil
	}
	if structs.HTTPStatus(err) != http.StatusBadRequest {
		return nil, err
	}
	resp.Error = err.Error()
	var ve *structs.ValidationError
	if errors.As(err, &ve) {
		resp.ValidationErrors = append([]string(nil), ve.Errors...)
	} else {
		resp.ValidationErrors = []string{err.Error()}
	}
	return resp, nil
}
