package persist

import (
	"bytes"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRecordTypesNeverChange pins the record numbers: snapshots outlive
// binaries, and core/state's restore test writes recAlloc and recEnd by hand.
func TestRecordTypesNeverChange(t *testing.T) {
	for name, c := range map[string]struct{ got, want byte }{
		"recAlloc":    {recAlloc, 8},
		"recEnd":      {recEnd, 255},
		"recIndex":    {recIndex, 1},
		"recACLRole":  {recACLRole, 23},
		"recVariable": {recVariable, 90},
		"recRootKey":  {recRootKey, 91},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", name, c.got, c.want)
		}
	}
}

// TestReadStopsAtInsertError: the first insert error ends Read, which
// returns it (not as ErrBadSnapshot) after its decoder stopped.
func TestReadStopsAtInsertError(t *testing.T) {
	var stream []byte
	stream = append(stream, Magic...)
	stream = append(stream, Version)
	for i := 0; i < 3000; i++ { // more rows than the decoder's buffer
		stream = append(stream, recEval, 2, '{', '}')
	}
	stream = append(stream, recEnd, 0)

	boom := errors.New("boom")
	calls := 0
	err := Read(bytes.NewReader(stream), func(table string, obj any) error {
		calls++
		if table != "evals" {
			t.Errorf("table = %q, want evals", table)
		}
		return boom
	})
	if !errors.Is(err, boom) || errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("err = %v, want the insert error", err)
	}
	if calls != 1 {
		t.Errorf("insert called %d times after its error, want 1", calls)
	}
}
