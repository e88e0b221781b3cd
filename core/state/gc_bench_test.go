package state

import (
	"flag"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

var (
	gcReapObjects = flag.Int("gcreap.objects", 200_000, "BenchmarkGCReapEntry: evals plus allocs in state")
	gcReapBatch   = flag.Int("gcreap.batch", 2000, "BenchmarkGCReapEntry: objects per GCReap entry")
	gcReapPerJob  = flag.Int("gcreap.perjob", 100, "BenchmarkGCReapEntry: complete evals (each with one alloc) per job")
)

// BenchmarkGCReapEntry: the time one GCReap entry of -gcreap.batch objects
// (jobs' allocs, evals and the job, in that order; -gcreap.perjob evals
// and as many allocs a job) takes to apply on a state
// of -gcreap.objects terminal evals and allocs, with changes tracked as
// the FSM's event feed tracks them. The cost per entry should follow the
// entry's size, not the state's.
func BenchmarkGCReapEntry(b *testing.B) {
	s := testStore(b)
	s.SetChangeSink(func(uint64, memdb.Changes) {})
	perJob := max(1, *gcReapPerJob)
	jobs := max(1, *gcReapObjects/(2*perJob))
	var index uint64 = 10
	var all []structs.GCReapRequest
	for j := 0; j < jobs; j++ {
		job := mockJob("sysbatch")
		job.Stop = true
		index++
		job = storedJob(b, s, index, job)
		evals := make([]*structs.Evaluation, perJob)
		allocs := make([]*structs.Allocation, perJob)
		for i := range evals {
			evals[i] = mockEval(job, structs.EvalStatusComplete)
			a := mockAlloc(job, "gone")
			a.EvalID = evals[i].ID
			a.ClientStatus = structs.AllocClientStatusComplete
			allocs[i] = a
		}
		index++
		must(b, s.UpsertEvals(index, evals))
		index++
		must(b, s.UpsertAllocs(index, allocs))
		var r structs.GCReapRequest
		for _, a := range allocs {
			got, err := s.AllocByID(nil, a.ID)
			must(b, err)
			r.Allocs = append(r.Allocs, ref(got.Namespace, got.ID, got.ModifyIndex))
		}
		for _, e := range evals {
			got, err := s.EvalByID(nil, e.ID)
			must(b, err)
			r.Evals = append(r.Evals, ref(got.Namespace, got.ID, got.ModifyIndex))
		}
		got, err := s.JobByID(nil, job.Namespace, job.ID)
		must(b, err)
		r.Jobs = append(r.Jobs, ref(got.Namespace, got.ID, got.ModifyIndex))
		all = append(all, r)
	}
	// The entries cut the jobs' allocs, evals and then the job into
	// -gcreap.batch objects each, as the engine does: a job larger than
	// an entry is reaped over several.
	type item struct {
		kind int // 0 alloc, 1 eval, 2 job
		ref  structs.GCRef
	}
	var items []item
	for _, r := range all {
		for _, x := range r.Allocs {
			items = append(items, item{0, x})
		}
		for _, x := range r.Evals {
			items = append(items, item{1, x})
		}
		items = append(items, item{2, r.Jobs[0]})
	}
	per := max(1, *gcReapBatch)
	b.ResetTimer()
	var took, worst, cpu time.Duration
	var allocated uint64
	var reaped, entries int
	for i := 0; i < b.N && len(items) > 0; i++ {
		var req structs.GCReapRequest
		n := min(per, len(items))
		for _, it := range items[:n] {
			switch it.kind {
			case 0:
				req.Allocs = append(req.Allocs, it.ref)
			case 1:
				req.Evals = append(req.Evals, it.ref)
			default:
				req.Jobs = append(req.Jobs, it.ref)
			}
		}
		items = items[n:]
		index++
		start, cpu0, heap0 := time.Now(), processCPU(b), heapAllocated()
		out, err := s.GCReap(index, &req)
		d := time.Since(start)
		cpu += processCPU(b) - cpu0
		allocated += heapAllocated() - heap0
		must(b, err)
		if out.Reaped() != req.Len() {
			b.Fatalf("reaped %d of %d (skipped %d)", out.Reaped(), req.Len(), out.Skipped)
		}
		took += d
		worst = max(worst, d)
		reaped += out.Reaped()
		entries++
	}
	b.ReportMetric(float64(took.Microseconds())/1000/float64(entries), "ms/entry")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
	b.ReportMetric(float64(took.Nanoseconds())/1000/float64(reaped), "µs/object")
	// The process's CPU (every goroutine, Go's collector included) while
	// the entries applied: on a shared machine the wall time follows the
	// CPU the process is given, and this does not.
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(reaped), "cpu-µs/object")
	// The bytes the entries allocated: memdb's radix copies, mostly, which
	// Go's collector then pays for. Unlike the times it does not depend on
	// the machine's load.
	b.ReportMetric(float64(allocated)/float64(reaped), "B/object")
}

// heapAllocated is the bytes allocated on the heap so far.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// processCPU is the process's user plus system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
