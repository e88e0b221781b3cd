package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
	"github.com/drover-org/drover/plugins/builtin"
)

// BenchmarkCSIClaimRelease counts the Raft writes a claim's release costs,
// from the release's start to the claim freed (raft-writes/claim): the
// growth of the leader's log over the release of claims claims, divided
// by claims. Nothing else writes meanwhile: the allocs keep running and no
// job waits for the volumes.
//
//	go test -run '^$' -bench BenchmarkCSIClaimRelease -benchtime 3x ./core/server/
//
// client: the client reports its node steps done (node-detached) and the
// claim is taken from there to freed. detach: `volume detach` of the
// node's claims. controller / node-only: the plugin needs a controller
// detach, or not. own-volume: one claim per volume; shared: all claims of
// one multi-writer volume.
func BenchmarkCSIClaimRelease(b *testing.B) {
	const claims = 8
	for _, shared := range []bool{false, true} {
		for _, controller := range []bool{true, false} {
			for _, how := range []string{"client", "detach"} {
				name := how + "/" + map[bool]string{true: "controller", false: "node-only"}[controller] + "/" +
					map[bool]string{true: "shared", false: "own-volume"}[shared]
				b.Run(name, func(b *testing.B) {
					e := newReleaseBench(b, controller, shared, claims)
					var writes uint64
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						e.claimAll(b)
						i0 := e.s.raft.LastIndex()
						b.StartTimer()
						e.release(b, how)
						b.StopTimer()
						writes += e.s.raft.LastIndex() - i0
						b.StartTimer()
					}
					b.ReportMetric(float64(writes)/float64(b.N*claims), "raft-writes/claim")
				})
			}
		}
	}
}

// releaseBench is a server with one node running plugin hp (with a
// controller that answers every call, node-detach included, with
// success or without one), n running allocs on the node, and volumes of
// hp: v0.. (one per alloc) or, shared, v0 (multi-writer) for all.
type releaseBench struct {
	s      *Server
	node   *structs.Node
	allocs []*structs.Allocation
	vols   []string // by alloc
	access structs.CSIVolumeAccessMode
}

func newReleaseBench(b *testing.B, controller, shared bool, n int) *releaseBench {
	b.Helper()
	s, err := New(Config{
		Logger: hclog.NewNullLogger(), DevMode: true, Schedulers: builtin.InProcess{},
		KnownDrivers: []string{"raw_exec"}, HeartbeatTTL: time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitForLeader(ctx); err != nil {
		b.Fatal(err)
	}
	node := csiNode("a", "hp", true)
	if controller {
		node.CSINodePlugins["hp"].RequiresControllerPlugin = true
		node.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true, RequiresControllerPlugin: true,
			ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}
	}
	if _, err := s.Nodes().Register(ctx, node); err != nil {
		b.Fatal(err)
	}
	// The node's client: answers controller and node-detach calls.
	pctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pctx.Err() == nil {
			r, err := s.CSI().ControllerOps(pctx, &structs.CSIControllerPollArgs{NodeID: node.ID, SecretID: node.SecretID, MaxWait: int64(time.Second)})
			if err != nil {
				return
			}
			var res []*structs.CSIControllerOpResult
			for _, op := range r.Ops {
				out := confirmValidate(op)
				out.ID = op.ID
				res = append(res, out)
			}
			if len(res) > 0 {
				if err := s.CSI().ControllerDone(pctx, &structs.CSIControllerDoneArgs{NodeID: node.ID, SecretID: node.SecretID, Results: res}); err != nil {
					return
				}
			}
		}
	}()
	b.Cleanup(func() { stop(); wg.Wait() })

	e := &releaseBench{s: s, node: node, access: structs.CSIVolumeAccessModeSingleNodeWriter}
	if shared {
		e.access = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	}
	var vols []*structs.CSIVolume
	for i := range n {
		id := fmt.Sprintf("v%d", i)
		if shared {
			id = "v0"
		}
		e.vols = append(e.vols, id)
		if i == 0 || !shared {
			v := csiVol(id, "hp")
			v.RequestedCapabilities[0].AccessMode = e.access
			vols = append(vols, v)
		}
	}
	if _, err := s.CSI().RegisterCSIVolumes(ctx, vols); err != nil {
		b.Fatal(err)
	}
	j := testJob("holders", "batch")
	j.TaskGroups[0].Count = n
	if _, err := s.Jobs().Register(ctx, j, false, 0); err != nil {
		b.Fatal(err)
	}
	testwait.For(b, 30*time.Second, fmt.Sprintf("%d allocs placed", n), func() bool {
		as, err := s.State().AllocsByJob(nil, structs.DefaultNamespace, "holders", true)
		if err != nil {
			b.Fatal(err)
		}
		e.allocs = as
		return len(as) == n
	})
	// Placement done: its eval and plan writes are behind us.
	e.waitQuiet(b)
	return e
}

// claimAll claims volume i for alloc i, and waits for the log to settle.
func (e *releaseBench) claimAll(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	for i, a := range e.allocs {
		_, err := e.s.CSI().ClaimVolume(ctx, &structs.CSIVolumeClaimArgs{NodeID: e.node.ID, SecretID: e.node.SecretID,
			Namespace: structs.DefaultNamespace, VolumeID: e.vols[i], AllocationID: a.ID, Mode: structs.CSIVolumeClaimWrite,
			AccessMode: e.access, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem})
		if err != nil {
			b.Fatal(err)
		}
	}
	e.waitQuiet(b)
}

// release releases every claim and waits for all to be freed and the log
// to settle.
func (e *releaseBench) release(b *testing.B, how string) {
	b.Helper()
	ctx := context.Background()
	for i, a := range e.allocs {
		var err error
		switch how {
		case "client":
			_, err = e.s.CSI().UnpublishVolume(ctx, &structs.CSIVolumeUnpublishArgs{NodeID: e.node.ID, SecretID: e.node.SecretID,
				Namespace: structs.DefaultNamespace, VolumeID: e.vols[i],
				Claim: &structs.CSIVolumeClaim{AllocationID: a.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateNodeDetached}})
		case "detach":
			if i > 0 && e.vols[i] == e.vols[i-1] {
				continue // detached with the first
			}
			_, err = e.s.csi.UnpublishClaim(ctx, structs.DefaultNamespace, e.vols[i], &structs.CSIVolumeClaim{NodeID: e.node.ID, Mode: structs.CSIVolumeClaimGC})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range e.vols {
		testwait.For(b, time.Minute, "volume "+id+" freed", func() bool {
			v, err := e.s.State().CSIVolumeRaw(nil, structs.DefaultNamespace, id)
			if err != nil {
				b.Fatal(err)
			}
			return v != nil && !v.InUse() && len(v.PastClaims) == 0
		})
	}
	e.waitQuiet(b)
}

// waitQuiet waits until the log has not grown for 100ms (the volume
// watcher's passes after a release write nothing more, or what they write
// is counted).
func (e *releaseBench) waitQuiet(b *testing.B) {
	b.Helper()
	last, since := e.s.raft.LastIndex(), time.Now()
	testwait.For(b, 30*time.Second, "the raft log to settle (no entry for 100ms)", func() bool {
		if i := e.s.raft.LastIndex(); i != last {
			last, since = i, time.Now()
		}
		return time.Since(since) >= 100*time.Millisecond
	})
}
