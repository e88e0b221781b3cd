package rawexec

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
	d := drivertest.Connect(t, New(hclog.NewNullLogger()))
	for _, tc := range []struct{ name, raw, wantErr string }{
		{"none", "", ""},
		{"keys", `{"enabled": true, "no_cgroups": true, "denied_host_users": ["root"]}`, ""},
		{"empty user", `{"denied_host_users": [""]}`, "raw_exec plugin config: denied_host_users[0] is empty"},
		{"unknown key", `{"enabled": true, "x": 1}`, `raw_exec plugin config: json: unknown field "x"`},
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
