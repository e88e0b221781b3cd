// Package goldenfile compares a test's output with its golden file, for
// the SDK's golden runners (scheduler plans, GC decisions).
package goldenfile

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Check compares got with the file golden, or rewrites the file when
// update is set. A difference fails t and shows the lines that differ.
func Check(t testing.TB, golden string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("response differs from %s (run with -update to accept):\n%s", golden, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the lines that differ, enough to read a failure without a
// diff tool.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
