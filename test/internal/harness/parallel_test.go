package harness

import (
	"flag"
	"testing"
)

// DefaultParallel changes -parallel only when the command line left it
// at its default.
func TestDefaultParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	old := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(old) })
	// Whether this run's command line set -parallel decides the answer.
	explicit := false
	flag.Visit(func(v *flag.Flag) { explicit = explicit || v.Name == "test.parallel" })
	got := DefaultParallel(7)
	switch {
	case explicit && f.Value.String() != old:
		t.Errorf("-parallel given as %s was changed to %s", old, f.Value.String())
	case !explicit && (got != 7 || f.Value.String() != "7"):
		t.Errorf("DefaultParallel(7) = %d, -parallel %s; want 7", got, f.Value.String())
	}
}
