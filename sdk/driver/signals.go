package driver

import (
	"fmt"
	"strings"
	"syscall"
)

// ParseSignal resolves a signal name as jobspecs write it ("SIGINT"; the
// "SIG" prefix and letter case are optional) to the platform's signal.
// Unknown names, and names the platform lacks, wrap ErrInvalidSignal.
func ParseSignal(name string) (syscall.Signal, error) {
	key := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(key, "SIG") {
		key = "SIG" + key
	}
	sig, ok := signalsByName[key]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrInvalidSignal, name)
	}
	return sig, nil
}
