// Package csibridgetest runs a Bridge implementation behind the real
// csi-bridge plugin gRPC glue inside the test process, so a bridge's tests
// exercise exactly what the client agent sees, in milliseconds and without
// a subprocess.
package csibridgetest

import (
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/shared"
)

// Connect serves impl over an in-process go-plugin gRPC connection and
// returns the client side. The connection is closed when t ends.
func Connect(t testing.TB, impl csibridge.Bridge) csibridge.Bridge {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
		shared.KindCSIBridge: &csibridge.Plugin{Impl: impl},
	})
	t.Cleanup(func() {
		// Server first: the client's Close asks the server to stop itself,
		// and go-plugin's Stop is not safe to run twice concurrently.
		server.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(shared.KindCSIBridge)
	if err != nil {
		t.Fatalf("dispense %s plugin: %v", shared.KindCSIBridge, err)
	}
	b, ok := raw.(csibridge.Bridge)
	if !ok {
		t.Fatalf("dispensed %T, not a csibridge.Bridge", raw)
	}
	return b
}
