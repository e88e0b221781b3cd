package derivedid

import (
	"regexp"
	"testing"
)

var uuidV8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestDerivedIDs(t *testing.T) {
	a := Of(1, "eval", "node", "web[0]")
	if !uuidV8.MatchString(a) {
		t.Fatalf("%q is not a version-8 RFC 9562 UUID", a)
	}
	for _, tc := range []struct {
		name  string
		other string
	}{
		{"another number", Of(2, "eval", "node", "web[0]")},
		{"parts split differently", Of(1, "evaln", "ode", "web[0]")},
		{"another part", Of(1, "eval", "node", "web[1]")},
	} {
		if tc.other == a {
			t.Errorf("%s: same ID %s", tc.name, a)
		}
	}
	if b := Of(1, "eval", "node", "web[0]"); b != a {
		t.Errorf("same input, different IDs: %s, %s", a, b)
	}
	// Reusing a buffer that holds something else gives the same ID.
	id, buf := Append([]byte("leftover bytes"), 1, "eval", "node", "web[0]")
	if id != a || len(buf) == 0 {
		t.Errorf("with a reused buffer: %s, want %s", id, a)
	}
}
