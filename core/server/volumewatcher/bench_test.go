package volumewatcher

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// The volume watcher's cost, on a real state store holding many volumes.
//
// BenchmarkVolumeWatcherReap: 10,000 volumes, 100 of which hold a claim
// whose allocation has completed. One op is a leader step-up with those
// 100 past claims waiting: from SetEnabled(true) until the unpublisher has
// freed all 100, plus the SetEnabled(false) that stops the workers. The
// fake unpublisher does what Server.releaseOne (core/server/csi_claim.go)
// does for a claim whose node is gone and whose plugin has a controller:
// four checkpoint writes (unpublishing, node detached, controller
// detached, ready to free), each a CSIVolumeClaims write on the store under
// one lock with the next index, as the FSM applies Raft entries one at a
// time; the controller call itself is free. Every one of those writes
// wakes the watcher's loop, which reads the volumes written since its
// last read (the whole table only at step-up). The
// watcher runs with the server's settings (Config defaults). Reported:
// ns/op (wall), cpu-ms/op (user+system CPU of the whole process over the
// timed part, from getrusage: the watcher's loop and workers and the
// fake's state writes), writes/op (state writes, the Raft entries the
// leader would apply), unpublish-calls/op and passes/op (worker passes).
//
// BenchmarkVolumeWatcherIdle: the steady cost when there is nothing to
// release: N volumes, none claimed, no worker. One op is one write to an
// unrelated volume (a GC pseudo-claim, the cheapest write of a volume),
// and, with watcher=on, the wait until the watcher's loop has handled it:
// the loop calls Config.State once per round, after its notify, so the
// benchmark's State function signals each round. With watcher=off the
// same writes run without a watcher: the difference of the two cpu-us/op
// is what the watcher spends per write it has nothing to do for, which
// times the write rate of the volumes table is its idle CPU.

// benchEnv is a state store with a node fingerprinting plugin hp, a job,
// and n volumes of hp, vol-00000 onwards.
type benchEnv struct {
	store *state.StateStore
	mu    sync.Mutex // serialises writes, as the FSM does
	index uint64
	node  *structs.Node
	job   *structs.Job
	ids   []string
}

func newBenchEnv(b *testing.B, n int) *benchEnv {
	b.Helper()
	s, err := state.NewStateStore()
	must(b, err)
	e := &benchEnv{store: s, index: 100}
	e.node = &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n1", Datacenter: "dc1",
		NodePool: structs.NodePoolDefault, Status: structs.NodeStatusReady,
		CSINodePlugins: map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true,
			NodeInfo: &structs.CSINodeInfo{ID: "csi-n1"}}},
	}
	e.write(b, func(i uint64) error { return s.UpsertNode(i, e.node) })
	job := &structs.Job{ID: "bench-job", Namespace: ns, Type: "batch",
		TaskGroups: []*structs.TaskGroup{{Name: "web", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"}}}}}}
	job.Canonicalize()
	e.write(b, func(i uint64) error { return s.UpsertJob(i, job) })
	e.job, err = s.JobByID(nil, ns, job.ID)
	must(b, err)
	vols := make([]*structs.CSIVolume, 0, n)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("vol-%05d", i)
		e.ids = append(e.ids, id)
		vols = append(vols, &structs.CSIVolume{ID: id, Namespace: ns, PluginID: "hp", ExternalID: "ext-" + id,
			RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: writer,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}})
	}
	e.write(b, func(i uint64) error { return s.UpsertCSIVolumes(i, vols) })
	return e
}

// apply runs one state write with the next index.
func (e *benchEnv) apply(fn func(index uint64) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.index++
	return fn(e.index)
}

func (e *benchEnv) write(b *testing.B, fn func(index uint64) error) {
	b.Helper()
	must(b, e.apply(fn))
}

// pastClaims gives each of volumes a write claim of a fresh allocation,
// then completes the allocations: each volume then holds one claim to
// release.
func (e *benchEnv) pastClaims(b *testing.B, volumes []string) {
	b.Helper()
	allocs := make([]*structs.Allocation, 0, len(volumes))
	claims := make([]*structs.CSIVolumeClaimRequest, 0, len(volumes))
	done := make([]*structs.Allocation, 0, len(volumes))
	for _, id := range volumes {
		a := &structs.Allocation{ID: uuid.NewString(), Namespace: ns, EvalID: uuid.NewString(),
			Name: structs.AllocName(e.job.ID, "web", 0), NodeID: e.node.ID, JobID: e.job.ID, Job: e.job,
			TaskGroup: "web", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
		allocs = append(allocs, a)
		claims = append(claims, &structs.CSIVolumeClaimRequest{Namespace: ns, VolumeID: id,
			Claim: &structs.CSIVolumeClaim{AllocationID: a.ID, NodeID: a.NodeID, ExternalNodeID: "csi-n1",
				Mode: structs.CSIVolumeClaimWrite, AccessMode: writer, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}})
		done = append(done, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusComplete})
	}
	e.write(b, func(i uint64) error { return e.store.UpsertAllocs(i, allocs) })
	e.write(b, func(i uint64) error { return e.store.CSIVolumeClaims(i, claims) })
	e.write(b, func(i uint64) error { return e.store.UpdateAllocsFromClient(i, done) })
}

// releaseSteps are the checkpoints of Server.releaseOne for a claim whose
// node is gone, on a plugin with a controller.
var releaseSteps = []structs.CSIVolumeClaimState{
	structs.CSIVolumeClaimStateUnpublishing,
	structs.CSIVolumeClaimStateNodeDetached,
	structs.CSIVolumeClaimStateControllerDetached,
	structs.CSIVolumeClaimStateReadyToFree,
}

// benchUnpublisher writes each claim's checkpoints into the store, counts
// calls, writes and frees, and closes done at the target'th free.
type benchUnpublisher struct {
	e      *benchEnv
	calls  atomic.Int64
	writes atomic.Int64
	freed  atomic.Int64
	target int64
	done   chan struct{}
}

func (u *benchUnpublisher) reset(target int) {
	u.calls.Store(0)
	u.writes.Store(0)
	u.freed.Store(0)
	u.target = int64(target)
	u.done = make(chan struct{})
}

func (u *benchUnpublisher) UnpublishClaim(_ context.Context, namespace, volumeID string, claim *structs.CSIVolumeClaim) error {
	u.calls.Add(1)
	for _, st := range releaseSteps {
		c := claim.Copy()
		c.State = st
		err := u.e.apply(func(i uint64) error {
			return u.e.store.CSIVolumeClaims(i, []*structs.CSIVolumeClaimRequest{{Namespace: namespace, VolumeID: volumeID, Claim: c}})
		})
		if err != nil {
			return err
		}
		u.writes.Add(1)
	}
	if u.freed.Add(1) == u.target {
		close(u.done)
	}
	return nil
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkVolumeWatcherReap(b *testing.B) {
	const volumes, claimed = 10000, 100
	e := newBenchEnv(b, volumes)
	var targets []string
	for i := 0; i < volumes; i += volumes / claimed {
		targets = append(targets, e.ids[i])
	}
	un := &benchUnpublisher{e: e}
	w := New(Config{State: func() *state.StateStore { return e.store }, Unpublisher: un})
	defer w.Stop()

	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	var writes, calls, passes int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e.pastClaims(b, targets)
		un.reset(len(targets))
		p0 := w.passes.Load()
		runtime.GC() // the setup's garbage is not the watcher's
		c0 := cpuTime(b)
		b.StartTimer()

		w.SetEnabled(true)
		select {
		case <-un.done:
		case <-time.After(2 * time.Minute):
			b.Fatalf("freed %d of %d claims within 2m", un.freed.Load(), len(targets))
		}
		w.SetEnabled(false)

		b.StopTimer()
		cpu += cpuTime(b) - c0
		writes += un.writes.Load()
		calls += un.calls.Load()
		passes += int64(w.passes.Load() - p0)
		for _, id := range targets {
			if v, err := e.store.CSIVolumeRaw(nil, ns, id); err != nil || v.InUse() {
				b.Fatalf("volume %s still in use after its release (%v)", id, err)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/n/1000, "cpu-ms/op")
	b.ReportMetric(float64(writes)/n, "writes/op")
	b.ReportMetric(float64(calls)/n, "unpublish-calls/op")
	b.ReportMetric(float64(passes)/n, "passes/op")
}

func BenchmarkVolumeWatcherIdle(b *testing.B) {
	for _, volumes := range []int{1000, 10000} {
		cost := map[bool]float64{}
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("volumes=%d/watcher=off", volumes)
			if on {
				name = fmt.Sprintf("volumes=%d/watcher=on", volumes)
			}
			b.Run(name, func(b *testing.B) {
				e := newBenchEnv(b, volumes)
				// round is signalled by each round of the watcher's
				// loop (it reads Config.State once a round); with no
				// claim anywhere there is no worker to read it too.
				round := make(chan struct{}, 1)
				w := New(Config{Unpublisher: &benchUnpublisher{e: e}, State: func() *state.StateStore {
					select {
					case round <- struct{}{}:
					default:
					}
					return e.store
				}})
				defer w.Stop()
				if on {
					w.SetEnabled(true)
					<-round // the first round: the loop is up
				}
				gc := func(i int) error {
					id := e.ids[i%len(e.ids)]
					return e.apply(func(index uint64) error {
						return e.store.CSIVolumeClaims(index, []*structs.CSIVolumeClaimRequest{{Namespace: ns, VolumeID: id,
							Claim: &structs.CSIVolumeClaim{Mode: structs.CSIVolumeClaimGC}}})
					})
				}
				b.ReportAllocs()
				runtime.GC()
				b.ResetTimer()
				c0 := cpuTime(b)
				for i := 0; i < b.N; i++ {
					if err := gc(i); err != nil {
						b.Fatal(err)
					}
					if on {
						<-round
					}
				}
				b.StopTimer()
				us := float64((cpuTime(b) - c0).Nanoseconds()) / float64(b.N) / 1000
				b.ReportMetric(us, "cpu-us/op")
				cost[on] = us
				if w.Workers() != 0 {
					b.Fatalf("%d workers with nothing claimed", w.Workers())
				}
			})
		}
		if len(cost) == 2 {
			fmt.Printf("volume watcher, %d volumes: %.1f µs CPU per write of an unrelated volume (%.1f with the watcher, %.1f without)\n",
				volumes, cost[true]-cost[false], cost[true], cost[false])
		}
	}
}

func (u *benchUnpublisher) UnpublishClaims(ctx context.Context, namespace, volumeID string, claims []*structs.CSIVolumeClaim) []error {
	return eachClaim(ctx, namespace, volumeID, claims, u.UnpublishClaim)
}
