package pluginhost

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	refusal := status.Error(codes.InvalidArgument, "bad request")
	for _, tc := range []struct {
		name        string
		ctx         context.Context
		down        bool
		err         error
		unavailable bool
	}{
		{"success", live, false, nil, false},
		{"connection gone", live, false, status.Error(codes.Unavailable, "EOF"), true},
		{"torn down under a live caller", live, false, status.Error(codes.Canceled, "closing"), true},
		{"caller cancelled", cancelled, false, status.Error(codes.Canceled, "context canceled"), false},
		{"plugin refusal", live, false, refusal, false},
		{"any error from a dead instance", live, true, status.Error(codes.Unknown, "transport"), true},
		{"already classified", live, false, unavailable("p", errors.New("down")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.ctx, "p", tc.down, tc.err)
			if errors.Is(got, ErrPluginUnavailable) != tc.unavailable {
				t.Fatalf("classify = %v, unavailable want %v", got, tc.unavailable)
			}
			if tc.err != nil && !errors.Is(got, tc.err) {
				t.Errorf("classify = %v lost the original error %v", got, tc.err)
			}
			if tc.err == nil && got != nil {
				t.Errorf("classify(nil) = %v", got)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}.withDefaults()
	const ms = time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}
	var d time.Duration
	for i, w := range want {
		if d = b.next(d); d != w {
			t.Errorf("step %d: %s, want %s", i, d, w)
		}
	}
	if b.ResetAfter != 30*time.Second {
		t.Errorf("default ResetAfter = %s", b.ResetAfter)
	}
	if got := (Backoff{}).withDefaults(); got != (Backoff{100 * time.Millisecond, 10 * time.Second, 30 * time.Second}) {
		t.Errorf("defaults = %+v", got)
	}
}
