package docker

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/network"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// TestPortBindings: each label of `ports` forwards its host port on the
// alloc's address to `to` (or the same port) inside, TCP and UDP; a label
// the group's network lacks, or one listed twice, is refused.
func TestPortBindings(t *testing.T) {
	pc, _ := ParsePluginConfig(nil)
	cfg := testTaskConfig(nil, nil)
	cfg.Ports = []*driverpb.PortMapping{
		{Label: "http", Value: 8080, To: 80, HostIp: "10.0.0.1"},
		{Label: "dyn", Value: 23456, HostIp: "10.0.0.1"},
	}
	tc, err := parseTaskConfig([]byte(`{"image":"x","ports":["http","dyn"]}`), pc)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := createOptions(cfg, tc, pc)
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.0.0.1")
	want := map[string]network.PortBinding{
		"80/tcp": {HostIP: ip, HostPort: "8080"}, "80/udp": {HostIP: ip, HostPort: "8080"},
		"23456/tcp": {HostIP: ip, HostPort: "23456"}, "23456/udp": {HostIP: ip, HostPort: "23456"},
	}
	if len(opts.HostConfig.PortBindings) != len(want) || len(opts.Config.ExposedPorts) != len(want) {
		t.Fatalf("bindings = %v, exposed = %v, want %d of each", opts.HostConfig.PortBindings, opts.Config.ExposedPorts, len(want))
	}
	for p, b := range want {
		got := opts.HostConfig.PortBindings[network.MustParsePort(p)]
		if len(got) != 1 || got[0] != b {
			t.Errorf("binding of %s = %v, want %v", p, got, b)
		}
	}

	for _, bad := range []struct{ raw, want string }{
		{`{"image":"x","ports":["admin"]}`, `ports[0] "admin" is not a port of the group's network block (it has ["dyn" "http"])`},
		{`{"image":"x","ports":["http","http"]}`, `ports[1] "http" is listed twice`},
	} {
		tc, err := parseTaskConfig([]byte(bad.raw), pc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := createOptions(cfg, tc, pc); err == nil || !strings.Contains(err.Error(), bad.want) || !errors.Is(err, driver.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig containing %q", bad.raw, err, bad.want)
		}
	}
}
