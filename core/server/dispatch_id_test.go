package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// IdPrefixTemplate and the IDs built from it are checked: no spaces, NUL,
// newlines or other control characters (and no "/" in the prefix); a
// refused dispatch writes nothing. A job ID follows Nomad's rule (no
// spaces or NUL, any other character), and a child inherits it.
func TestDispatchIDValidation(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	registerJob(t, s, paramJob("p", structs.DispatchPayloadOptional))
	ok := map[string]string{"color": "blue"}
	for name, tc := range map[string]struct{ prefix, msg string }{
		"space":   {"a b", `IdPrefixTemplate "a b": must not contain spaces`},
		"NUL":     {"a\x00b", "must not contain NUL characters"},
		"newline": {"a\nb", `must not contain white space ('\n')`},
		"tab":     {"a\tb", `must not contain white space ('\t')`},
		"control": {"a\x1bb", "must not contain control characters"},
		"slash":   {"a/b", `must not contain "/"`},
	} {
		t.Run(name, func(t *testing.T) {
			before := s.State().LatestIndex()
			_, err := s.Jobs().Dispatch(ctx, "", &structs.JobDispatchRequest{JobID: "p", Meta: ok, IdPrefixTemplate: tc.prefix})
			var ve *structs.ValidationError
			if !errors.As(err, &ve) || structs.HTTPStatus(err) != 400 {
				t.Fatalf("err = %T %v; want a ValidationError (400)", err, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
			assertNoChildren(t, s, "p", before)
		})
	}

	resp, err := s.Jobs().Dispatch(ctx, "", &structs.JobDispatchRequest{JobID: "p", Meta: ok, IdPrefixTemplate: "nightly_run-1"})
	if err != nil {
		t.Fatalf("a clean prefix was refused: %v", err)
	}
	if !strings.HasPrefix(resp.DispatchedJobID, "p/dispatch-nightly_run-1-") {
		t.Fatalf("child ID %q", resp.DispatchedJobID)
	}

	for _, id := range []string{"bad id", "bad\x00id"} {
		j := paramJob(id, structs.DispatchPayloadOptional)
		if _, err := s.Jobs().Register(ctx, j, false, 0); err == nil || structs.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), "job ID") {
			t.Errorf("register of job ID %q: err = %v; want a 400 naming the job ID", id, err)
		}
	}
	odd := "odd\nid\x7f"
	registerJob(t, s, paramJob(odd, structs.DispatchPayloadOptional))
	child, err := s.Jobs().Dispatch(ctx, "", &structs.JobDispatchRequest{JobID: odd, Meta: ok})
	if err != nil || !strings.HasPrefix(child.DispatchedJobID, odd+"/dispatch-") {
		t.Errorf("dispatch of %q: %+v, %v; want a child under it", odd, child, err)
	}
}
