package base_test

import (
	"testing"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/scheduler"
)

type kindSettings struct {
	N int `hcl:"n,optional"`
}

// The kinds' interfaces are embedded unset: registration never calls them.
type (
	schedImpl struct {
		scheduler.Scheduler
		*base.Config[kindSettings]
	}
	gcImpl struct {
		gc.Collector
		*base.Config[kindSettings]
	}
	driverImpl struct {
		driver.Driver
		*base.Config[kindSettings]
	}
	bridgeImpl struct {
		csibridge.Bridge
		*base.Config[kindSettings]
	}
)

// TestKindsRegisterBase checks that every kind's GRPCServer serves the
// Base service for a Configurable implementation and only for one.
func TestKindsRegisterBase(t *testing.T) {
	cfg := base.MustConfig(kindSettings{N: 1}, nil)
	cases := []struct {
		name         string
		configurable plugin.GRPCPlugin
		plain        plugin.GRPCPlugin
	}{
		{"scheduler", &scheduler.Plugin{Impl: schedImpl{Config: cfg}}, &scheduler.Plugin{Impl: schedImpl{}}},
		{"gc", &gc.Plugin{Impl: gcImpl{Config: cfg}}, &gc.Plugin{Impl: gcImpl{}}},
		{"driver", &driver.Plugin{Impl: driverImpl{Config: cfg}}, &driver.Plugin{Impl: driverImpl{}}},
		{"csi-bridge", &csibridge.Plugin{Impl: bridgeImpl{Config: cfg}}, &csibridge.Plugin{Impl: bridgeImpl{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := grpc.NewServer()
			if err := tc.configurable.GRPCServer(nil, srv); err != nil {
				t.Fatal(err)
			}
			if _, ok := srv.GetServiceInfo()[base.ServiceName]; !ok {
				t.Fatalf("a Configurable %s does not serve %s", tc.name, base.ServiceName)
			}
			// An implementation whose config is unset is refused, not
			// served without its config.
			if err := tc.plain.GRPCServer(nil, grpc.NewServer()); err == nil {
				t.Fatalf("a %s whose PluginConfig is nil was served", tc.name)
			}
		})
	}
}

// TestKindsWithoutConfig checks that an implementation that is not
// Configurable gets no Base service: the host sees UNIMPLEMENTED.
func TestKindsWithoutConfig(t *testing.T) {
	type plainSched struct{ scheduler.Scheduler }
	type plainGC struct{ gc.Collector }
	for _, p := range []plugin.GRPCPlugin{
		&scheduler.Plugin{Impl: plainSched{}}, &gc.Plugin{Impl: plainGC{}},
		&driver.Plugin{Impl: struct{ driver.Driver }{}}, &csibridge.Plugin{Impl: struct{ csibridge.Bridge }{}},
	} {
		srv := grpc.NewServer()
		if err := p.GRPCServer(nil, srv); err != nil {
			t.Fatal(err)
		}
		if _, ok := srv.GetServiceInfo()[base.ServiceName]; ok {
			t.Fatalf("%T serves %s without a config", p, base.ServiceName)
		}
		if len(srv.GetServiceInfo()) != 1 {
			t.Fatalf("%T registered %d services, want its kind's only", p, len(srv.GetServiceInfo()))
		}
	}
}

// TestGoPluginServesBase serves a Configurable scheduler the way a plugin
// binary does, through go-plugin's gRPC server over a unix socket, and
// configures it through the plugin's one connection, as the host does.
func TestGoPluginServesBase(t *testing.T) {
	cfg := base.MustConfig(kindSettings{N: 1}, nil)
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
		"scheduler": &scheduler.Plugin{Impl: schedImpl{Config: cfg}},
	})
	// Closing the client asks the plugin's controller to shut down, which
	// stops the server; stopping it here too would race go-plugin's own
	// Stop (goleak catches a server left running).
	defer func() { _ = client.Close() }()
	c := base.NewClient(client.Conn)
	spec, err := c.ConfigSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.GetAttributes()) != 1 || spec.GetAttributes()[0].GetDefaultJson() != "1" {
		t.Fatalf("schema %v", spec)
	}
	if errs, err := c.SetConfig(t.Context(), []byte(`{"n":5}`), "sched"); err != nil || len(errs) > 0 {
		t.Fatal(errs, err)
	}
	if got := cfg.Get().N; got != 5 {
		t.Fatalf("n = %d after SetConfig, want 5", got)
	}
}
