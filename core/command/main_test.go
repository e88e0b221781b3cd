package command

import "testing"

func TestMain(m *testing.M) { testMain(m, Commands) }
