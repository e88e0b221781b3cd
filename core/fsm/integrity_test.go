package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

// TestApplyRefusesAlteredEntry: whichever byte of an entry is changed,
// Apply stops at it with an error naming the index, and nothing of it is
// written; a change past the header is reported as a checksum mismatch
// (today's encoding would apply, say, a changed job ID as another job).
func TestApplyRefusesAlteredEntry(t *testing.T) {
	job := mockJob("batch")
	job.ID = "victim"
	good, err := Encode(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
	must(t, err)
	if err := CheckEntry(good); err != nil {
		t.Fatalf("CheckEntry(good) = %v", err)
	}
	type flip struct {
		pos  int
		mask byte
	}
	flips := []flip{{0, 0x80}}
	for i := range good {
		flips = append(flips, flip{i, 0x01})
	}
	for _, fl := range flips {
		bad := bytes.Clone(good)
		bad[fl.pos] ^= fl.mask
		if CheckEntry(bad) == nil {
			t.Errorf("byte %d ^ %#x: CheckEntry accepts the altered entry", fl.pos, fl.mask)
		}
		f, _ := testFSM(t)
		resp := f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: bad})
		stopped := f.Failed()
		if stopped == nil {
			t.Errorf("byte %d ^ %#x: the altered entry applied (response %v)", fl.pos, fl.mask, resp)
			continue
		}
		if !strings.Contains(stopped.Error(), "Raft log entry at index 7 ") {
			t.Errorf("byte %d ^ %#x: stop error %q does not name index 7", fl.pos, fl.mask, stopped)
		}
		if fl.pos >= entryHeaderSize-4 && !strings.Contains(stopped.Error(), "checksum mismatch") {
			t.Errorf("byte %d ^ %#x: stop error %q is not a checksum mismatch", fl.pos, fl.mask, stopped)
		}
		if jobs, _ := f.State().Jobs(nil); len(jobs) != 0 {
			t.Errorf("byte %d ^ %#x: the altered entry wrote %d jobs", fl.pos, fl.mask, len(jobs))
		}
	}
}

// TestApplyLegacyEntry: an entry in the format older drover wrote (type
// byte and MessagePack, no checksum) still applies after an upgrade.
func TestApplyLegacyEntry(t *testing.T) {
	job := mockJob("batch")
	payload, err := marshal(&structs.JobRegisterRequest{Job: job})
	must(t, err)
	legacy := append([]byte{byte(structs.JobRegisterRequestType)}, payload...)
	if err := CheckEntry(legacy); err != nil {
		t.Fatalf("CheckEntry(legacy) = %v", err)
	}
	f, _ := testFSM(t)
	if resp := f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: legacy}); resp != nil {
		t.Fatalf("legacy entry: %v", resp)
	}
	if got, _ := f.State().JobByID(nil, structs.DefaultNamespace, job.ID); got == nil {
		t.Fatal("the legacy entry's job is not stored")
	}
	// New entries follow it in the same log.
	mustApply(t, f, 4, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})
}

// TestRestoreRefusesAlteredSnapshot: a snapshot with any one byte changed
// is refused, naming the snapshot, and the current state stays in place.
func TestRestoreRefusesAlteredSnapshot(t *testing.T) {
	src, _ := testFSM(t)
	populate(t, src)
	good := snapshotBytes(t, src)
	headerLen := len(snapMagic) + 1 + 1 + len("mem")

	dst, _ := testFSM(t)
	mustApply(t, dst, 5, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})
	before := dst.State()
	step := max(1, len(good)/300)
	positions := []int{len(good) / 2, len(good) - 1, len(good) - 5}
	for i := 0; i < len(good); i += step {
		positions = append(positions, i)
	}
	for _, pos := range positions {
		bad := bytes.Clone(good)
		bad[pos] ^= 0x01
		err := dst.Restore(io.NopCloser(bytes.NewReader(bad)))
		if err == nil {
			t.Errorf("byte %d of %d: the altered snapshot restored", pos, len(good))
			continue
		}
		if dst.State() != before {
			t.Fatalf("byte %d: a refused snapshot replaced the state", pos)
		}
		if pos >= headerLen && !strings.Contains(err.Error(), `snapshot "mem"`) {
			t.Errorf("byte %d: error %q does not name the snapshot", pos, err)
		}
	}
	// A byte inside the state stream is a checksum mismatch.
	bad := bytes.Clone(good)
	bad[len(good)/2] ^= 0x01
	if err := dst.Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, ErrSnapshotChecksum) {
		t.Errorf("mid-stream change: error %v, want ErrSnapshotChecksum", err)
	}
	// Cut short: refused too.
	if err := dst.Restore(io.NopCloser(bytes.NewReader(good[:len(good)-3]))); err == nil || dst.State() != before {
		t.Errorf("truncated snapshot: error %v, state replaced %v", err, dst.State() != before)
	}
	// The sound one restores.
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(good))))
	if dst.State() == before || dst.State().LatestIndex() != 19 {
		t.Errorf("sound snapshot: swapped %v, index %d", dst.State() != before, dst.State().LatestIndex())
	}
}

// TestRestoreLegacySnapshot: a snapshot an older drover took (the bare
// state stream, no checksum) still restores.
func TestRestoreLegacySnapshot(t *testing.T) {
	src, _ := testFSM(t)
	populate(t, src)
	snap, err := src.State().Snapshot()
	must(t, err)
	var legacy bytes.Buffer
	must(t, snap.Persist(&legacy))
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(&legacy)))
	want, got := dump(t, src.State()), dump(t, dst.State())
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s differs after a legacy restore", k)
		}
	}
}

// TestEntryMarkerIsNoType: the envelope's marker, with or without the
// ignore flag, and every single-bit flip of it, is no message type: an old
// entry is never read as a checksummed one, and a damaged marker never
// applies as some other entry.
func TestEntryMarkerIsNoType(t *testing.T) {
	for bit := -1; bit < 8; bit++ {
		b := entryMarker
		if bit >= 0 {
			b ^= 1 << bit
		}
		if _, ok := appliers[structs.MessageType(b)&^structs.IgnoreUnknownTypeFlag]; ok {
			t.Errorf("marker %#x (bit %d flipped) is the message type %s", b, bit, typeName(structs.MessageType(b)))
		}
	}
}
