package testtier

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records a skip instead of skipping.
type recorder struct {
	testing.TB
	skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) { r.skipped = fmt.Sprintf(format, args...) }

// setShort sets -test.short for the test and restores it afterwards.
func setShort(t *testing.T, v bool) {
	t.Helper()
	old := flag.Lookup("test.short").Value.String()
	if err := flag.Set("test.short", fmt.Sprint(v)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("test.short", old) })
}

func TestHelpersSkipOnlyInTheFastTier(t *testing.T) {
	helpers := map[string]struct {
		mark func(testing.TB)
		why  string
	}{
		"Agent":   {Agent, "starts a drover agent"},
		"Browser": {Browser, "headless browser"},
		"Slow":    {func(tb testing.TB) { Slow(tb, "waits for the next minute") }, "waits for the next minute"},
	}
	for name, h := range helpers {
		t.Run(name, func(t *testing.T) {
			setShort(t, true)
			r := &recorder{TB: t}
			h.mark(r)
			if !strings.Contains(r.skipped, h.why) || !strings.Contains(r.skipped, "make check") {
				t.Errorf("under -short: skip message %q, want one naming %q and the tier", r.skipped, h.why)
			}
			setShort(t, false)
			r = &recorder{TB: t}
			h.mark(r)
			if r.skipped != "" {
				t.Errorf("without -short: skipped with %q, want the test to run", r.skipped)
			}
		})
	}
}

func TestSkipSuite(t *testing.T) {
	setShort(t, true)
	if !SkipSuite("starts agents") {
		t.Error("SkipSuite under -short = false, want true")
	}
	setShort(t, false)
	if SkipSuite("starts agents") {
		t.Error("SkipSuite without -short = true, want false")
	}
}
