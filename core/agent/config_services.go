package agent

import "github.com/drover-org/drover/core/structs"

// server { default_service_provider = "nomad" } is a drover extension: a
// job's service block that names no provider means Consul in Nomad, and
// drover has no Consul, so such a job is refused at registration; with
// this key set to "nomad", the servers register those services in
// drover's own catalogue instead, with their checks.

// checkServiceProvider refuses a provider other than Nomad's two.
func (s *ServerConfig) checkServiceProvider(p *problems) {
	switch s.DefaultServiceProvider {
	case "", structs.ServiceProviderConsul, structs.ServiceProviderNomad:
	default:
		p.add("server.default_service_provider", "must be %q or %q (got %q)",
			structs.ServiceProviderConsul, structs.ServiceProviderNomad, s.DefaultServiceProvider)
	}
}

// defaultServiceProvider is the configured provider, Nomad's "consul"
// when unset.
func (s *ServerConfig) defaultServiceProvider() string {
	if s.DefaultServiceProvider == "" {
		return structs.ServiceProviderConsul
	}
	return s.DefaultServiceProvider
}
