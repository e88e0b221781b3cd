package structs

import (
	"strings"
	"testing"
)

func TestValidateDNS(t *testing.T) {
	tests := []struct {
		name string
		dns  *DNSConfig
		want string // "" = valid
	}{
		{"nil", nil, ""},
		{"empty", &DNSConfig{}, ""},
		{"full", &DNSConfig{Servers: []string{"1.1.1.1", "2001:db8::1", "10.0.0.2"}, Searches: []string{"svc.local", "example.com."}, Options: []string{"ndots:2", "rotate"}}, ""},
		{"four servers", &DNSConfig{Servers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}}, "servers: 4 given, at most 3"},
		{"server a name", &DNSConfig{Servers: []string{"one.one"}}, `servers[0]: "one.one" is not an IP address`},
		{"server with zone", &DNSConfig{Servers: []string{"fe80::1%eth0"}}, `servers[0]: "fe80::1%eth0" is not an IP address`},
		{"server with newline", &DNSConfig{Servers: []string{"1.1.1.1\nnameserver 6.6.6.6"}}, "servers[0]"},
		{"search blank", &DNSConfig{Searches: []string{"a b"}}, `searches[0]: "a b" is not a domain name`},
		{"search empty", &DNSConfig{Searches: []string{""}}, "searches[0]"},
		{"search too long", &DNSConfig{Searches: []string{strings.Repeat("a.", 130) + "com"}}, "searches[0]"},
		{"too many searches", &DNSConfig{Searches: []string{"a", "b", "c", "d", "e", "f", "g"}}, "searches: 7 given, at most 6"},
		{"option blank", &DNSConfig{Options: []string{"ndots: 2"}}, `options[0]: "ndots: 2" must be`},
		{"option newline", &DNSConfig{Options: []string{"rotate\nnameserver 6.6.6.6"}}, "options[0]"},
		{"too many options", &DNSConfig{Options: make([]string, 17)}, "options: 17 given, at most 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateDNS(tt.dns)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestValidateNetworkHostname(t *testing.T) {
	tests := []struct {
		name, host, mode, want string
	}{
		{"bridge", "web-1", "bridge", ""},
		{"none", "w", "none", ""},
		{"cni", "w", "cni/mynet", ""},
		{"host mode", "w", "host", `hostname is only allowed with mode "bridge"`},
		{"default mode", "w", "", `(mode is "host")`},
		{"dot", "a.b", "bridge", `hostname "a.b" must be`},
		{"leading dash", "-a", "bridge", "must be"},
		{"blank", "a b", "bridge", "must be"},
		{"too long", strings.Repeat("a", 64), "bridge", "1-63"},
		{"interpolated", "web-${NOMAD_ALLOC_INDEX}", "bridge", ""},
		{"interpolated too long", "${" + strings.Repeat("a", 260) + "}", "bridge", "at most 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateNetworkHostname(tt.host, tt.mode)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
