package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
)

func drivertestConnect(t *testing.T, d *Driver) driver.Driver { return drivertest.Connect(t, d) }

// TestFingerprintEngineGone needs no engine: an endpoint whose socket does
// not exist makes the driver undetected and unhealthy, with the reason.
func TestFingerprintEngineGone(t *testing.T) {
	sock := t.TempDir() + "/docker.sock"
	cfg, err := ParsePluginConfig([]byte(`{"endpoint":"unix://` + sock + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	fp, err := drivertestConnect(t, d).Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fp.GetDetected() || fp.GetHealthy() || len(fp.GetAttributes()) != 0 {
		t.Fatalf("Fingerprint = %v, want undetected and unhealthy", fp)
	}
	if want := "Failed to connect to the docker engine at unix://" + sock; !strings.Contains(fp.GetHealthDescription(), want) {
		t.Errorf("health description %q does not contain %q", fp.GetHealthDescription(), want)
	}
}
