package taskfiles

import (
	"testing"

	"go.uber.org/goleak"
)

// The renderer's watchers and the artifact size watcher are goroutines:
// none may outlive its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
