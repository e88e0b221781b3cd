package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ev(topic, key, ns string) *Event {
	return &Event{Topic: topic, Type: "T", Key: key, Namespace: ns}
}

func publishN(b *Buffer, from, n uint64) {
	for i := from; i < from+n; i++ {
		b.Publish(i, []*Event{ev(TopicJob, "j", "default")})
	}
}

// next reads one batch with a deadline, so a missing batch fails the test
// instead of hanging it.
func next(t *testing.T, s *Subscription) (*Batch, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Next(ctx)
}

func indexes(t *testing.T, s *Subscription, n int) []uint64 {
	t.Helper()
	var out []uint64
	for range n {
		b, err := next(t, s)
		if err != nil {
			t.Fatalf("Next after %v: %v", out, err)
		}
		out = append(out, b.Index)
	}
	return out
}

func TestBufferResume(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		published uint64 // indexes 10..10+published-1
		from      uint64
		want      []uint64
		truncated bool
	}{
		{"from zero is the whole backlog", 8, 3, 0, []uint64{10, 11, 12}, false},
		{"from an index in the buffer", 8, 5, 12, []uint64{12, 13, 14}, false},
		{"from an index between batches", 8, 5, 0, []uint64{10, 11}, false},
		{"wrapped: oldest kept is 14", 4, 8, 0, []uint64{14, 15, 16, 17}, false},
		{"wrapped: older index starts at the oldest and says so", 4, 8, 11, []uint64{14, 15}, true},
		{"wrapped: index in the buffer", 4, 8, 16, []uint64{16, 17}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuffer(tt.size, 0)
			defer b.Close()
			publishN(b, 10, tt.published)
			s, err := b.Subscribe(tt.from, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got := indexes(t, s, len(tt.want))
			if !equal(got, tt.want) {
				t.Fatalf("indexes = %v, want %v", got, tt.want)
			}
			if s.Truncated != tt.truncated {
				t.Fatalf("Truncated = %v, want %v", s.Truncated, tt.truncated)
			}
			if tt.truncated && s.StartIndex != tt.want[0] {
				t.Fatalf("StartIndex = %d, want %d", s.StartIndex, tt.want[0])
			}
		})
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBufferLiveAndBounds(t *testing.T) {
	b := NewBuffer(4, 2)
	defer b.Close()
	publishN(b, 1, 2)
	s, err := b.Subscribe(100, nil) // past the end: only new batches
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go publishN(b, 100, 1)
	if got := indexes(t, s, 1); got[0] != 100 {
		t.Fatalf("live batch = %v, want [100]", got)
	}
	// Empty batches are not published.
	b.Publish(101, nil)
	if st := b.Stats(); st.LatestIndex != 100 || st.Published != 3 || st.Subscribers != 1 {
		t.Fatalf("stats = %+v", st)
	}
	s2, err := b.Subscribe(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe(0, nil); !errors.Is(err, ErrTooManySubscribers) {
		t.Fatalf("third subscriber: err = %v, want ErrTooManySubscribers", err)
	}
	s2.Close()
	s2.Close() // idempotent: frees one slot only
	s3, err := b.Subscribe(0, nil)
	if err != nil {
		t.Fatalf("subscribe after a close: %v", err)
	}
	s3.Close()
	if st := b.Stats(); st.Subscribers != 1 {
		t.Fatalf("subscribers = %d, want 1", st.Subscribers)
	}
}

func TestSlowSubscriberDropped(t *testing.T) {
	b := NewBuffer(4, 0)
	defer b.Close()
	s, err := b.Subscribe(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The publisher laps the reader without waiting for it.
	done := make(chan struct{})
	go func() { publishN(b, 1, 10); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publisher blocked on a subscriber that does not read")
	}
	if _, err := next(t, s); !errors.Is(err, ErrSubscriberLagged) {
		t.Fatalf("Next = %v, want ErrSubscriberLagged", err)
	}
	if st := b.Stats(); st.Dropped != 1 {
		t.Fatalf("dropped = %d, want 1", st.Dropped)
	}
	// A new subscription resumes from the oldest kept.
	s2, _ := b.Subscribe(1, nil)
	defer s2.Close()
	if got := indexes(t, s2, 1); got[0] != 7 || !s2.Truncated {
		t.Fatalf("resume = %v truncated=%v, want [7] true", got, s2.Truncated)
	}
}

func TestBufferCloseEndsWaiters(t *testing.T) {
	b := NewBuffer(4, 0)
	s, _ := b.Subscribe(0, nil)
	defer s.Close()
	errc := make(chan error, 1)
	go func() { _, err := s.Next(context.Background()); errc <- err }()
	b.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Next = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the waiting subscriber")
	}
	if _, err := b.Subscribe(0, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close = %v, want ErrClosed", err)
	}
}

func TestNextEndsWithContext(t *testing.T) {
	b := NewBuffer(4, 0)
	defer b.Close()
	s, _ := b.Subscribe(0, nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
}

// The ring holds at most maxEvents events across its batches: the oldest
// batches go first, the newest always stays.
func TestBufferEventBound(t *testing.T) {
	b := NewBuffer(8, 0)
	defer b.Close()
	b.SetMaxEvents(5)
	two := func() []*Event { return []*Event{ev(TopicJob, "a", "default"), ev(TopicJob, "b", "default")} }
	for i := uint64(1); i <= 4; i++ {
		b.Publish(i, two())
	}
	if st := b.Stats(); st.OldestIndex != 3 || st.LatestIndex != 4 {
		t.Fatalf("after 8 events with a bound of 5: oldest %d latest %d, want 3 and 4", st.OldestIndex, st.LatestIndex)
	}
	big := make([]*Event, 10)
	for i := range big {
		big[i] = ev(TopicNode, "n", "")
	}
	b.Publish(5, big)
	if st := b.Stats(); st.OldestIndex != 5 || st.LatestIndex != 5 {
		t.Fatalf("after a batch over the bound: oldest %d latest %d, want 5 alone", st.OldestIndex, st.LatestIndex)
	}
	s, _ := b.Subscribe(1, nil)
	defer s.Close()
	if got := indexes(t, s, 1); got[0] != 5 || !s.Truncated {
		t.Fatalf("resume from 1 = %v truncated %v, want [5] true", got, s.Truncated)
	}
	// Wrapping still counts right: 20 more small batches keep the bound.
	for i := uint64(6); i < 26; i++ {
		b.Publish(i, []*Event{ev(TopicJob, "c", "default")})
	}
	if st := b.Stats(); st.OldestIndex != 21 || st.LatestIndex != 25 {
		t.Fatalf("after wrapping: oldest %d latest %d, want 21 and 25", st.OldestIndex, st.LatestIndex)
	}
}
