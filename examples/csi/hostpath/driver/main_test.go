package hostpath_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Ginkgo (run by csi-test's sanity suite) keeps a goroutine waiting
		// for interrupt signals for the life of the process; it is not ours.
		goleak.IgnoreTopFunction("github.com/onsi/ginkgo/v2/internal/interrupt_handler.(*InterruptHandler).registerForInterrupts.func2"),
	)
}
