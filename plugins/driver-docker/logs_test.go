package docker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/safefs"
)

// frame is one record of the engine's multiplexed log stream, with the
// timestamp prefix the driver asks for.
func frame(stream byte, ts time.Time, msg string) []byte {
	payload := ts.UTC().Format(time.RFC3339Nano) + " " + msg
	hdr := make([]byte, 8)
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	return append(hdr, payload...)
}

func TestCopyStream(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	var in bytes.Buffer
	in.Write(frame(1, t0.Add(1), "one\n"))
	in.Write(frame(2, t0.Add(2), "err\n"))
	in.Write(frame(1, t0.Add(3), "two\n"))
	in.Write(frame(1, t0.Add(4), "three\n"))
	raw := in.Bytes()

	for _, tc := range []struct {
		name           string
		since          int64
		stdout, stderr string
		lastSaved      int64
	}{
		{"from the start", 0, "one\ntwo\nthree\n", "err\n", t0.Add(4).UnixNano()},
		{"resumed after the checkpoint", t0.Add(2).UnixNano(), "two\nthree\n", "", t0.Add(4).UnixNano()},
		{"nothing new", t0.Add(4).UnixNano(), "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			var saved int64
			err := copyStream(bufio.NewReader(bytes.NewReader(raw)), tc.since, &out, &errs, func(last int64) { saved = last })
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.stdout || errs.String() != tc.stderr {
				t.Errorf("stdout %q stderr %q, want %q %q", out.String(), errs.String(), tc.stdout, tc.stderr)
			}
			if saved != tc.lastSaved {
				t.Errorf("checkpoint saved %d, want %d", saved, tc.lastSaved)
			}
		})
	}
	// A stream cut inside a record is an error, not a silent truncation.
	var out bytes.Buffer
	if err := copyStream(bufio.NewReader(bytes.NewReader(raw[:len(raw)-3])), 0, &out, &out, func(int64) {}); err == nil {
		t.Error("truncated stream: no error")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	alloc := t.TempDir()
	root, err := safefs.Open(alloc)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	path := filepath.Join(alloc, "web", checkpointFile)
	if got := readCheckpoint(root, path); got != 0 {
		t.Errorf("missing checkpoint = %d", got)
	}
	if err := writeCheckpoint(root, path, 1234567890123456789); err != nil {
		t.Fatal(err)
	}
	if got := readCheckpoint(root, path); got != 1234567890123456789 {
		t.Errorf("checkpoint = %d", got)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readCheckpoint(root, path); got != 0 {
		t.Errorf("corrupt checkpoint = %d, want 0 (copy from the start)", got)
	}
	// A checkpoint replaced by a link to a host file is neither read nor
	// written through; one outside the alloc dir is refused.
	host := filepath.Join(t.TempDir(), "host")
	if err := os.WriteFile(host, []byte(`{"since_unix_nano":42}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, path); err != nil {
		t.Fatal(err)
	}
	if got := readCheckpoint(root, path); got != 0 {
		t.Errorf("checkpoint read through a link = %d", got)
	}
	if err := writeCheckpoint(root, path, 7); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(host); string(b) != `{"since_unix_nano":42}` {
		t.Errorf("host file written through the checkpoint link: %q", b)
	}
	if err := writeCheckpoint(root, host, 7); !errors.Is(err, safefs.ErrUnsafePath) {
		t.Errorf("checkpoint outside the alloc dir: %v", err)
	}
}
