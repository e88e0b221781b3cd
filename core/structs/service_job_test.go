package structs

import (
	"strings"
	"testing"
	"time"
)

// serviceJob is a job whose group has one port and the given services.
func serviceJob(services ...*Service) *Job {
	j := &Job{ID: "shop", Type: "batch", Datacenters: []string{"dc1"}, TaskGroups: []*TaskGroup{{
		Name: "g", Count: 1,
		Networks: []*NetworkResource{{Mode: NetworkModeHost, DynamicPorts: []Port{{Label: "http"}}}},
		Services: services,
		Tasks:    []*Task{{Name: "t", Driver: "raw_exec"}},
	}}}
	j.Canonicalize()
	return j
}

func httpCheck() *ServiceCheck {
	return &ServiceCheck{Type: ServiceCheckHTTP, Path: "/", Interval: 10 * time.Second, Timeout: 2 * time.Second}
}

// Jobs sent as JSON meet the same rules as job files: each refusal names
// the service and the rule.
func TestServiceValidateJSON(t *testing.T) {
	tests := []struct {
		name string
		svc  *Service
		want string // "" valid
	}{
		{"valid", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{httpCheck()}}, ""},
		{"numeric port", &Service{Provider: "nomad", PortLabel: "8080"}, ""},
		{"no provider is the server's to resolve", &Service{PortLabel: "http"}, ""},
		{"consul", &Service{Provider: "consul", PortLabel: "http"}, `group "g": service "shop-g": provider "consul" needs Consul`},
		{"connect", &Service{Provider: "nomad", Connect: &ConsulConnect{Native: true}}, `group "g": service "shop-g": connect: not supported: it needs Consul Connect`},
		{"tagged_addresses", &Service{Provider: "nomad", TaggedAddresses: map[string]string{"lan": "x"}}, "tagged_addresses: not supported"},
		{"service identity", &Service{Provider: "nomad", Identity: &WorkloadIdentity{}}, "identity: not supported"},
		{"expose check", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "tcp", Expose: true, Interval: time.Second, Timeout: time.Second}}}, "expose: not supported"},
		{"grpc check", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "grpc", Interval: time.Second, Timeout: time.Second}}}, `type "grpc" is not supported`},
		{"grpc_service", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "tcp", GRPCService: "x", Interval: time.Second, Timeout: time.Second}}}, "grpc_service is for grpc checks"},
		{"zero interval", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "tcp", Timeout: time.Second}}}, "interval must be at least 1s (got 0s)"},
		{"unknown type", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "udp", Interval: time.Second, Timeout: time.Second}}}, `type is "udp"`},
		{"duplicate checks", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{httpCheck(), httpCheck()}}, "check names must be unique"},
		{"null check", &Service{Provider: "nomad", Checks: []*ServiceCheck{nil}}, "check 1: null is not allowed"},
		{"bad method", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "http", Path: "/", Method: "get it", Interval: time.Second, Timeout: time.Second}}}, "is not an HTTP method"},
		{"long body", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "http", Path: "/", Body: strings.Repeat("x", MaxCheckBodyBytes+1), Interval: time.Second, Timeout: time.Second}}}, "body is 4097 bytes"},
		{"too many meta", &Service{Provider: "nomad", Meta: manyMeta(MaxServiceMeta + 1)}, "meta has 65 entries"},
		{"negative restart grace", &Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{{Type: "tcp", Interval: time.Second, Timeout: time.Second, CheckRestart: &CheckRestart{Grace: -time.Second}}}}, "check_restart: grace must be between 0"},
		{"address with host mode", &Service{Provider: "nomad", AddressMode: "host", Address: "10.0.0.1"}, `address may only be set with address_mode "auto"`},
		{"interpolated name", &Service{Provider: "nomad", Name: "web-${NOMAD_ALLOC_INDEX}"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := serviceJob(tt.svc).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// A service's check_restart (as nomad/api may send it) is laid under each
// check's own and then held by the checks alone.
func TestServiceCheckRestartMerged(t *testing.T) {
	own := httpCheck()
	own.Name = "own"
	own.CheckRestart = &CheckRestart{Limit: 5}
	j := serviceJob(&Service{Provider: "nomad", PortLabel: "http",
		CheckRestart: &CheckRestart{Limit: 2, Grace: time.Minute},
		Checks:       []*ServiceCheck{httpCheck(), own}})
	s := j.TaskGroups[0].Services[0]
	if s.CheckRestart != nil {
		t.Error("the service still holds its check_restart")
	}
	if r := s.Checks[0].CheckRestart; r == nil || r.Limit != 2 || r.Grace != time.Minute {
		t.Errorf("first check's check_restart = %+v, want the service's", r)
	}
	if r := s.Checks[1].CheckRestart; r == nil || r.Limit != 5 || r.Grace != time.Minute {
		t.Errorf("second check's check_restart = %+v, want limit 5 over the service's grace", r)
	}
	j.Canonicalize()
	if r := s.Checks[1].CheckRestart; r.Limit != 5 || r.Grace != time.Minute {
		t.Errorf("not idempotent: %+v", r)
	}
}

func TestServiceTooMany(t *testing.T) {
	var svcs []*Service
	for i := range MaxServicesPerGroup + 1 {
		svcs = append(svcs, &Service{Provider: "nomad", Name: "s" + strings.Repeat("x", i%5) + string(rune('a'+i%26))})
	}
	if err := serviceJob(svcs...).Validate(); err == nil || !strings.Contains(err.Error(), "65 service blocks") {
		t.Fatalf("err = %v", err)
	}
}

// A plan's diff shows a changed check.
func TestServiceDiff(t *testing.T) {
	old := serviceJob(&Service{Provider: "nomad", PortLabel: "http", Checks: []*ServiceCheck{httpCheck()}})
	cur := old.Copy()
	cur.TaskGroups[0].Services[0].Checks[0].Path = "/health"
	cur.TaskGroups[0].Services[0].Checks[0].Header = map[string][]string{"X": {"y"}}
	d := DiffJobs(old, cur, false)
	if d == nil || len(d.TaskGroups) != 1 || d.TaskGroups[0].Type != DiffTypeEdited {
		t.Fatalf("diff = %+v", d)
	}
}

func manyMeta(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[strings.Repeat("k", i+1)] = "v"
	}
	return m
}
