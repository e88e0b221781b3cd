package raftstore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/drover-org/drover/internal/testtier"
)

// boltFile writes a raft.db holding a few log entries and returns its path
// and contents.
func boltFile(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raft.db")
	store, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 200; i++ {
		if err := store.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 300)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

func TestCheck(t *testing.T) {
	if err := Check(filepath.Join(t.TempDir(), "raft.db")); err != nil {
		t.Fatalf("a missing raft.db (first start): %v", err)
	}
	path, good := boltFile(t)
	if err := Check(path); err != nil {
		t.Fatalf("a healthy raft.db: %v", err)
	}
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "is empty (0 bytes)"},
		{"truncated", good[:len(good)/2], "it was truncated"},
		{"garbage", bytes.Repeat([]byte{0xAB}, len(good)), "no valid meta page"},
		{"shorter than a page", good[:100], "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.data)
			err := Check(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got %v; want an error naming %s and saying %q", err, path, tc.want)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, tc.data) {
				t.Error("the check changed the file")
			}
		})
	}

	// Garbage in any one page past the metas is refused or harmless; it
	// never faults or panics (either would end this test binary).
	rng := rand.New(rand.NewPCG(1, 2))
	for off := 2 * 4096; off < len(good); off += 4096 {
		bad := bytes.Clone(good)
		for i := off; i < off+4096 && i < len(bad); i++ {
			bad[i] = byte(rng.UintN(256))
		}
		write(bad)
		_ = Check(path)
	}
}

// A raft.db another agent holds open is reported as such after a bounded
// wait instead of blocking the start for good.
func TestCheckLocked(t *testing.T) {
	testtier.Slow(t, "waits out the 5 s raft.db lock timeout")
	path, _ := boltFile(t)
	store, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	err = Check(path)
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("got %v; want a lock error", err)
	}
}
