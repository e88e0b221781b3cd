package harness

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test server and client connection ends with its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
