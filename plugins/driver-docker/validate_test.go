package docker

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
)

// ValidateConfig, over the driver protocol, judges a config as the plugin
// takes it at start: the agent's start fails on what it refuses.
func TestValidateConfig(t *testing.T) {
	cfg, err := ParsePluginConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := New(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(impl.Shutdown)
	d := drivertest.Connect(t, impl)
	for _, tc := range []struct{ name, raw, wantErr string }{
		{"none", "", ""},
		{"gc", `{"gc": {"image": true, "image_delay": "3m"}, "volumes": {"enabled": true}}`, ""},
		{"bad delay", `{"gc": {"image_delay": "later"}}`, `docker plugin config: gc.image_delay "later" must be a non-negative duration such as "3m"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := d.ValidateConfig(t.Context(), []byte(tc.raw))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateConfig = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, driver.ErrInvalidPluginConfig) || err.Error() != tc.wantErr {
				t.Fatalf("ValidateConfig = %v, want ErrInvalidPluginConfig %q", err, tc.wantErr)
			}
		})
	}
}
