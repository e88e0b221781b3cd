package varcmd

import (
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, Commands) }
