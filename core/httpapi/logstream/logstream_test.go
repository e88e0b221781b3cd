package logstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func frames(t *testing.T, body io.Reader) []Frame {
	t.Helper()
	var out []Frame
	dec := json.NewDecoder(body)
	for {
		var f Frame
		if err := dec.Decode(&f); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return out
		}
		out = append(out, f)
	}
}

// TestWriterFrames: a write is split at MaxFrameData, every frame names the
// file and carries the offset past its data, counted from pos.
func TestWriterFrames(t *testing.T) {
	rec := httptest.NewRecorder()
	lw := NewWriter(rec, false, LogFile("t", "stdout"), 100)
	if lw.Started() {
		t.Fatal("started before any write")
	}
	if n, err := lw.Write([]byte(strings.Repeat("x", MaxFrameData+10))); err != nil || n != MaxFrameData+10 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if !lw.Started() || rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("started %v, status %d, type %q", lw.Started(), rec.Code, rec.Header().Get("Content-Type"))
	}
	got := frames(t, rec.Body)
	want := []int64{100 + MaxFrameData, 100 + MaxFrameData + 10}
	if len(got) != len(want) {
		t.Fatalf("%d frames, want %d", len(got), len(want))
	}
	for i, f := range got {
		if f.Offset != want[i] || f.File != "alloc/logs/t.stdout.0" {
			t.Errorf("frame %d: offset %d file %q, want %d alloc/logs/t.stdout.0", i, f.Offset, f.File, want[i])
		}
	}
}

// TestWriterPlain: plain output is the bytes themselves.
func TestWriterPlain(t *testing.T) {
	rec := httptest.NewRecorder()
	lw := NewWriter(rec, true, LogFile("t", "stderr"), 0)
	if _, err := lw.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	if rec.Body.String() != "line\n" || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("body %q, type %q", rec.Body.String(), rec.Header().Get("Content-Type"))
	}
}

// TestWriterHeartbeat: an idle stream gets empty frames, starting the
// response, and Heartbeat returns when its context ends.
func TestWriterHeartbeat(t *testing.T) {
	rec := httptest.NewRecorder()
	lw := NewWriter(rec, false, LogFile("t", "stdout"), 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lw.Heartbeat(ctx, time.Millisecond)
	}()
	testwait.For(t, 10*time.Second, "a heartbeat", lw.Started)
	cancel()
	<-done
	got := frames(t, rec.Body)
	if len(got) == 0 {
		t.Fatal("no frame written")
	}
	for _, f := range got {
		if f.Offset != 0 || len(f.Data) != 0 || f.File != "" || f.FileEvent != "" {
			t.Errorf("heartbeat frame %+v, want {}", f)
		}
	}
}
