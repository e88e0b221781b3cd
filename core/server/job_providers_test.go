package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestRegisterDefaultServiceProvider: a service naming no provider is
// Consul's, as in Nomad, and refused with the way out, unless the servers
// are configured default_service_provider = "nomad", which registers the
// job with its services resolved to drover's own catalogue. An explicit
// provider = "consul" is refused either way.
func TestRegisterDefaultServiceProvider(t *testing.T) {
	withServices := func(provider string) *structs.Job {
		j := testJob("web", "batch")
		tg := j.TaskGroups[0]
		tg.Services = []*structs.Service{{Name: "web", Provider: provider}}
		if len(tg.Tasks) == 0 {
			t.Fatal("test job has no task")
		}
		tg.Tasks[0].Services = []*structs.Service{{Name: "web-task", Provider: provider}}
		return j
	}
	tests := []struct {
		name, config, provider string
		// want: fragments of the refusal ("" accepted).
		want []string
	}{
		{"unset, default config", "", "", []string{
			`group "g": service "web": provider: not set, which means Consul in Nomad`,
			`group "g": task "t": service "web-task": provider: not set`,
			`server { default_service_provider = "nomad" }`}},
		{"unset, consul configured", "consul", "", []string{"which means Consul in Nomad"}},
		{"unset, nomad configured", "nomad", "", nil},
		{"explicit nomad", "", "nomad", nil},
		{"explicit consul, nomad configured", "nomad", "consul", []string{`provider "consul" needs Consul`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testServer(t, func(c *Config) { c.DefaultServiceProvider = tt.config })
			ctx := context.Background()
			job := withServices(tt.provider)
			resp, err := s.Jobs().Register(ctx, job, false, 0)
			stored, _ := s.State().JobByID(nil, "default", "web")
			if tt.want != nil {
				var ve *structs.ValidationError
				if !errors.As(err, &ve) || structs.HTTPStatus(err) != 400 {
					t.Fatalf("err = %v, want a validation error (400)", err)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("refusal lacks %q:\n%s", w, err)
					}
				}
				if stored != nil {
					t.Error("a refused job was stored")
				}
				return
			}
			if err != nil {
				t.Fatalf("register: %v", err)
			}
			waitEvalTerminal(t, s, resp.EvalID)
			if stored == nil {
				t.Fatal("job not stored")
			}
			for _, svc := range []*structs.Service{stored.TaskGroups[0].Services[0], stored.TaskGroups[0].Tasks[0].Services[0]} {
				if svc.Provider != structs.ServiceProviderNomad {
					t.Errorf("stored service %q has provider %q, want %q", svc.Name, svc.Provider, structs.ServiceProviderNomad)
				}
			}
		})
	}
}
