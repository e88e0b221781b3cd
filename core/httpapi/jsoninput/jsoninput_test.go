package jsoninput

import (
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestDecode: refusals name the limit and the place; bodies within the
// limits decode. The HTTP-level cases are in core/httpapi's TestDecodeLimits.
func TestDecode(t *testing.T) {
	deep := func(n int) string { return `{"A":{"b":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}` }
	wide := func(n int) string { return `{"L":[` + strings.TrimSuffix(strings.Repeat("1,", n), ",") + `]}` }
	tests := []struct {
		name, body string
		want       []string // substrings of the error; none: accepted
	}{
		{"nesting past the limit", deep(structs.MaxNestingDepth), []string{"MaxNestingDepth", "A.b[0]"}},
		{"nesting at the limit", deep(structs.MaxNestingDepth - 2), nil},
		{"too many elements", wide(structs.MaxCollectionElements + 1), []string{"MaxCollectionElements", "L"}},
		{"elements at the limit", wide(structs.MaxCollectionElements), nil},
		{"brackets inside strings do not count", `{"S":"` + strings.Repeat(`[{\"`, 200) + `"}`, nil},
		{"type mismatch names the field", `{"N":"x"}`, []string{`field "N"`, "expected int"}},
		{"empty body", ``, []string{"empty body"}},
		{"null element of a typed list", `{"P":[null]}`, []string{"null"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out struct {
				A map[string]any
				L []int
				S string
				N int
				P []*struct{ X int }
			}
			err := Decode([]byte(tc.body), &out)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted, want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %.300q lacks %q", err.Error(), w)
				}
			}
		})
	}
}
