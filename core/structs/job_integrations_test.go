package structs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestValidateIntegrations: a job with Nomad's integration blocks (as a
// job file parses them, or as Nomad's API sends them) is refused at
// registration naming the block, why and what to do instead; the empty
// blocks Nomad itself gives every job (a group's {"Namespace": ""}
// consul block, an identity that gives the task no token) are accepted.
func TestValidateIntegrations(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(j *Job)
		want string // "" when valid
	}{
		{"Nomad's empty consul block", func(j *Job) { j.TaskGroups[0].Consul = &Consul{} }, ""},
		{"the default consul cluster", func(j *Job) { j.TaskGroups[0].Tasks[0].Consul = &Consul{Cluster: "default"} }, ""},
		{"an identity giving no token", func(j *Job) { j.TaskGroups[0].Tasks[0].Identity = &WorkloadIdentity{Name: "default"} }, ""},
		{"group consul namespace", func(j *Job) { j.TaskGroups[0].Consul = &Consul{Namespace: "shop"} },
			`group "g": consul: not supported: drover has no Consul integration; use provider = "nomad" services`},
		{"task consul partition", func(j *Job) { j.TaskGroups[0].Tasks[0].Consul = &Consul{Partition: "p"} }, `group "g": task "t": consul: not supported`},
		{"task vault", func(j *Job) { j.TaskGroups[0].Tasks[0].Vault = NewVault() },
			`group "g": task "t": vault: not supported: drover has no Vault integration; give the task its secrets`},
		{"identity in env", func(j *Job) { j.TaskGroups[0].Tasks[0].Identity = &WorkloadIdentity{Env: true} },
			`group "g": task "t": identity: not supported: remove the identity block`},
		{"named identity", func(j *Job) { j.TaskGroups[0].Tasks[0].Identities = []*WorkloadIdentity{{Name: "aws"}} },
			`group "g": task "t": identity "aws": not supported`},
		{"multiregion", func(j *Job) { j.Multiregion = &Multiregion{Regions: []*MultiregionRegion{{Name: "west", Count: 1}}} },
			"multiregion: not supported: drover has no multi-region federation; remove the multiregion block and register the job in each region"},
		{"vault_token", func(j *Job) { j.VaultToken = "s.x" }, "vault_token: not supported"},
		{"consul_token", func(j *Job) { j.ConsulToken = "x" }, "consul_token: not supported"},
		{"service weights", func(j *Job) {
			j.TaskGroups[0].Services = []*Service{{Name: "s", Provider: "nomad", Weights: &ServiceWeights{Passing: 1}}}
		}, `group "g": service "s": weights: not supported`},
		{"service kind and cluster", func(j *Job) {
			j.TaskGroups[0].Services = []*Service{{Name: "s", Provider: "nomad", Kind: "api-gateway", Cluster: "c"}}
		}, `group "g": service "s": cluster: not supported`},
		{"check notes", func(j *Job) {
			j.TaskGroups[0].Services = []*Service{{Name: "s", Provider: "nomad", Checks: []*ServiceCheck{{Name: "c", Type: "script", Command: "x", TaskName: "t", Interval: time.Second, Timeout: time.Second, Notes: "n"}}}}
		}, `group "g": service "s": check "c": notes: not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Type: "batch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
				Name: "g", Count: 1, RestartPolicy: &RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Second, Mode: "fail"},
				Tasks: []*Task{{Name: "t", Driver: "raw_exec"}},
			}}}
			tc.mut(j)
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestIntegrationsJSON: Nomad's JSON names of the integration blocks
// decode into them, so a job sent by Nomad's API client is refused by
// name rather than losing the block.
func TestIntegrationsJSON(t *testing.T) {
	src := `{"ID":"j","Multiregion":{"Strategy":{"MaxParallel":1,"OnFailure":"fail_all"},"Regions":[{"Name":"west","Count":2}]},
"TaskGroups":[{"Name":"g","Consul":{"Namespace":"shop"},"Services":[{"Name":"s","Connect":{"SidecarService":{"Proxy":{"Upstreams":[{"DestinationName":"db","LocalBindPort":5432}]}}}}],
"Tasks":[{"Name":"t","Vault":{"Policies":["p"],"ChangeMode":"restart"},"Identity":{"Name":"default","Env":true}}]}]}`
	var j Job
	if err := json.Unmarshal([]byte(src), &j); err != nil {
		t.Fatal(err)
	}
	tg := j.TaskGroups[0]
	switch {
	case j.Multiregion == nil || j.Multiregion.Regions[0].Count != 2 || j.Multiregion.Strategy.OnFailure != "fail_all":
		t.Errorf("multiregion = %+v", j.Multiregion)
	case tg.Consul == nil || tg.Consul.Namespace != "shop":
		t.Errorf("consul = %+v", tg.Consul)
	case tg.Services[0].Connect == nil || tg.Services[0].Connect.SidecarService.Proxy.Upstreams[0].DestinationName != "db":
		t.Errorf("connect = %+v", tg.Services[0].Connect)
	case tg.Tasks[0].Vault == nil || tg.Tasks[0].Vault.Policies[0] != "p":
		t.Errorf("vault = %+v", tg.Tasks[0].Vault)
	case tg.Tasks[0].Identity == nil || !tg.Tasks[0].Identity.Env:
		t.Errorf("identity = %+v", tg.Tasks[0].Identity)
	}
}
