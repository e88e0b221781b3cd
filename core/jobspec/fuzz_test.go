package jobspec

import (
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// FuzzParse: any byte string either parses into a job or fails with a
// positioned *Error of kind invalid; it never panics. A parsed job can be
// validated without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte("job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		job, err := Parse("fuzz.hcl", src)
		if err != nil {
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("error without the invalid kind: %v", err)
			}
			return
		}
		if job == nil {
			t.Fatal("nil job without an error")
		}
		_ = job.Validate()
	})
}
