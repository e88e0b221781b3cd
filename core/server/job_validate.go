package server

import (
	"context"
	"errors"
	"fmt"
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

// resolveServiceProviders gives each service of job that names no
// provider the cluster's default (Config.DefaultServiceProvider): in
// Nomad such a service is Consul's, and drover has no Consul, so the job
// is refused with each service named and what to do, unless the servers
// are configured `server { default_service_provider = "nomad" }`, in
// which case the services are drover's own (registered in its catalogue
// with their checks). The stored job names the provider, so the client
// and every later version see it resolved.
func (ep Jobs) resolveServiceProviders(job *structs.Job) error {
	def := ep.srv.cfg.DefaultServiceProvider
	if def == "" {
		def = structs.ServiceProviderConsul
	}
	job.DefaultServiceProvider = def
	var refused []string
	resolve := func(s *structs.Service, where string) {
		if s == nil || s.Provider != "" {
			return
		}
		if def == structs.ServiceProviderNomad {
			s.Provider = structs.ServiceProviderNomad
			return
		}
		refused = append(refused, fmt.Sprintf("%s: service %q: provider: not set, which means Consul in Nomad, and drover has no Consul integration; "+
			"set provider = \"nomad\" in the service block, or configure the servers with server { default_service_provider = \"nomad\" } to serve such services in drover's own catalogue", where, s.Name))
	}
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		where := fmt.Sprintf("group %q", tg.Name)
		for _, s := range tg.Services {
			resolve(s, where)
		}
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			for _, s := range t.Services {
				resolve(s, fmt.Sprintf("%s: task %q", where, t.Name))
			}
		}
	}
	if len(refused) > 0 {
		return &structs.ValidationError{Errors: refused}
	}
	return nil
}
