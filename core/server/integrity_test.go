package server

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/drover-org/drover/core/structs"
)

// TestServerRefusesAlteredLogOnDisk: one byte of a committed entry's payload
// changed in raft.db (here the job's ID, which today is served as another
// job) stops the restarted server at that entry, with an error naming its
// index and the checksum mismatch, and nothing of the entry is served.
func TestServerRefusesAlteredLogOnDisk(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	fatal := make(chan error, 2)
	cfg := func(c *Config) {
		onDiskAlone(c, dir, addr)
		c.SnapshotThreshold = 1 << 20
		c.OnFatal = func(err error) { fatal <- err }
	}
	s := testServer(t, cfg)
	if _, err := s.Jobs().Register(context.Background(), testJob("victim-job", "sysbatch"), false, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}

	// Change one byte of the job's ID in the stored entry.
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft", "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	var altered uint64
	for i := first; i <= last && altered == 0; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		at := bytes.Index(l.Data, []byte("victim-job"))
		if l.Type != raft.LogCommand || at < 0 {
			continue
		}
		l.Data[at+5] = 'n' // victin-job
		if err := store.StoreLog(&l); err != nil {
			t.Fatal(err)
		}
		altered = i
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if altered == 0 {
		t.Fatal("no entry in raft.db holds the job's ID")
	}

	c := Config{Logger: s.cfg.Logger, Schedulers: s.cfg.Schedulers, KnownDrivers: s.cfg.KnownDrivers, HeartbeatTTL: time.Minute}
	cfg(&c)
	s2, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Shutdown() })
	want := []string{"Raft log entry at index " + itoa(altered) + " ", "checksum mismatch"}
	select {
	case err := <-fatal:
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("fatal error %q lacks %q", err, w)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server applied the altered entry: OnFatal not called")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s2.WaitForLeader(ctx); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("WaitForLeader = %v, want the checksum stop", err)
	}
	for _, id := range []string{"victim-job", "victin-job"} {
		if got, _ := s2.State().JobByID(nil, structs.DefaultNamespace, id); got != nil {
			t.Errorf("job %s is served from the altered entry", id)
		}
	}
}
