//go:build conformance

// The conformance kit (sdk/scheduler/conformance) has not landed on main
// yet; this file builds only with -tags conformance until it does.

package oneshot

import (
	"testing"

	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// The plugin passes the checks the core relies on for every scheduler
// plugin: its declaration, determinism, purged and stopped jobs, limits.
func TestConformance(t *testing.T) {
	conformance.Run(t, New("test"), conformance.Options{})
}
