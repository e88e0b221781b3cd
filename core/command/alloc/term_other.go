//go:build !linux

package alloc

import (
	"context"
	"errors"
	"os"
)

// Terminals are handled on Linux only: elsewhere -t must be asked for and
// the local terminal is left as it is.
func isTerminal(*os.File) bool { return false }

func makeRaw(*os.File) (func(), error) {
	return nil, errors.New("raw terminal mode is supported on Linux only")
}

func watchTerminalSize(context.Context, *os.File) <-chan [2]int {
	out := make(chan [2]int)
	close(out)
	return out
}
