package agent

import (
	"strings"
	"testing"
)

// TestDefaultServiceProviderConfig: server.default_service_provider is
// "consul" (Nomad's meaning of a service naming none) unless set to
// "nomad"; anything else is refused with the key named.
func TestDefaultServiceProviderConfig(t *testing.T) {
	tests := []struct {
		setting, want, wantErr string
	}{
		{"", "consul", ""},
		{`default_service_provider = "consul"`, "consul", ""},
		{`default_service_provider = "nomad"`, "nomad", ""},
		{`default_service_provider = "etcd"`, "", `server.default_service_provider: must be "consul" or "nomad" (got "etcd")`},
	}
	for _, tt := range tests {
		t.Run(tt.setting, func(t *testing.T) {
			c, err := ParseConfig("agent.hcl", []byte("data_dir = \"/x\"\nserver {\n enabled = true\n "+tt.setting+"\n}\n"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Server.defaultServiceProvider(); got != tt.want {
				t.Errorf("provider = %q, want %q", got, tt.want)
			}
		})
	}
}
