// Package drivertest runs a Driver implementation behind the real driver
// plugin gRPC glue inside the test process, so a driver's tests exercise
// exactly what the client agent sees, in milliseconds and without a
// subprocess.
package drivertest

import (
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/shared"
)

// Connect serves impl over an in-process go-plugin gRPC connection and
// returns the client side, as the host holds it. The connection is closed
// when t ends.
func Connect(t testing.TB, impl driver.Driver) driver.Client {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
		shared.KindDriver: &driver.Plugin{Impl: impl},
	})
	t.Cleanup(func() {
		// Server first: the client's Close asks the server to stop itself,
		// and go-plugin's Stop is not safe to run twice concurrently.
		server.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(shared.KindDriver)
	if err != nil {
		t.Fatalf("dispense %s plugin: %v", shared.KindDriver, err)
	}
	d, ok := raw.(driver.Client)
	if !ok {
		t.Fatalf("dispensed %T, not a driver.Client", raw)
	}
	return d
}
