package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/server/snapshotfile"
	"github.com/drover-org/drover/core/structs"
)

// tableRows decodes a snapshot file into each table's rows as sorted JSON,
// to compare two states.
func tableRows(t *testing.T, file []byte) map[string][]string {
	t.Helper()
	var payload bytes.Buffer
	if _, err := snapshotfile.Verify(bytes.NewReader(file), &payload, 0); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	err := fsm.ReadSnapshot(&payload, func(table string, obj any) error {
		b, err := json.Marshal(obj)
		rows[table] = append(rows[table], string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		slices.Sort(r)
	}
	return rows
}

func saveSnapshot(t *testing.T, s *Server) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.SaveSnapshot(context.Background(), &buf, false); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSnapshotRoundTrip saves a server's state, restores it into a fresh
// server and compares every table, row by row.
func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	s1 := testServer(t, nil)
	if _, err := s1.Nodes().Register(ctx, testNode("a")); err != nil {
		t.Fatal(err)
	}
	resp, err := s1.Jobs().Register(ctx, testJob("backup", "sysbatch"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "eval complete", func() bool { return evalStatus(t, s1, resp.EvalID) == structs.EvalStatusComplete })
	allocs, err := s1.State().AllocsByJob(nil, "default", "backup", true)
	if err != nil || len(allocs) == 0 {
		t.Fatalf("allocs before the backup: %d, %v", len(allocs), err)
	}
	file := saveSnapshot(t, s1)
	want := tableRows(t, file)

	s2 := testServer(t, nil)
	info, err := s2.RestoreSnapshot(ctx, bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if info.Index != s1.State().LatestIndex() || info.Size != int64(len(file)) {
		t.Errorf("restore info: index %d size %d; want %d and %d", info.Index, info.Size, s1.State().LatestIndex(), len(file))
	}
	got := tableRows(t, saveSnapshot(t, s2))
	for table, rows := range want {
		if !slices.Equal(got[table], rows) {
			t.Errorf("table %s after restore: %d rows, want %d\n got %.600v\nwant %.600v", table, len(got[table]), len(rows), got[table], rows)
		}
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			t.Errorf("table %s appeared after the restore: %.300v", table, got[table])
		}
	}
	after, err := s2.State().AllocsByJob(nil, "default", "backup", true)
	if err != nil || len(after) != len(allocs) {
		t.Fatalf("allocs after the restore: %d, %v; want %d", len(after), err, len(allocs))
	}
	// The restored server keeps working: a new job is scheduled.
	resp2, err := s2.Jobs().Register(ctx, testJob("after", "sysbatch"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "eval after restore", func() bool { return evalStatus(t, s2, resp2.EvalID) == structs.EvalStatusComplete })
}

// TestSnapshotRestoreRefusesDamage: a truncated, altered or foreign file is
// refused with an invalid-request error, and the state is left as it was.
func TestSnapshotRestoreRefusesDamage(t *testing.T) {
	ctx := context.Background()
	src := testServer(t, nil)
	gone, err := src.Jobs().Register(ctx, testJob("gone", "sysbatch"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "eval complete", func() bool { return evalStatus(t, src, gone.EvalID) == structs.EvalStatusComplete })
	good := saveSnapshot(t, src)

	dst := testServer(t, nil)
	keep, err := dst.Jobs().Register(ctx, testJob("keep", "sysbatch"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing else writes once its eval is done.
	waitFor(t, 10*time.Second, "eval complete", func() bool { return evalStatus(t, dst, keep.EvalID) == structs.EvalStatusComplete })
	flip := func(i int) []byte {
		b := slices.Clone(good)
		b[i] ^= 0x20
		return b
	}
	cases := map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("not a snapshot at all, just text"),
		"truncated half": good[:len(good)/2],
		"no checksum":    good[:len(good)-32],
		"one byte short": good[:len(good)-1],
		"payload flip":   flip(len(good) / 2),
		"checksum flip":  flip(len(good) - 1),
		"metadata flip":  flip(12),
		"trailing bytes": append(slices.Clone(good), 'x'),
	}
	before := tableRows(t, saveSnapshot(t, dst))
	for name, file := range cases {
		_, err := dst.RestoreSnapshot(ctx, bytes.NewReader(file))
		if !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("%s: error %v; want an invalid-request error", name, err)
			continue
		}
		if job, _ := dst.State().JobByID(nil, "default", "keep"); job == nil {
			t.Fatalf("%s: the refused restore changed the state", name)
		}
	}
	after := tableRows(t, saveSnapshot(t, dst))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("state changed by refused restores")
	}
	// The good file still restores.
	if _, err := dst.RestoreSnapshot(ctx, bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	if job, _ := dst.State().JobByID(nil, "default", "gone"); job == nil {
		t.Fatal("the good file did not restore")
	}
	if job, _ := dst.State().JobByID(nil, "default", "keep"); job != nil {
		t.Fatal("the restore kept a job the snapshot does not have")
	}
}
