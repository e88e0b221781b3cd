package services

import (
	"testing"

	"go.uber.org/goleak"
)

// The registrar and the checks run goroutines: none may outlive its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
