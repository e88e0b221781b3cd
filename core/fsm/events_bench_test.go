package fsm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/structs"
)

// BenchmarkApplyEvents measures what the event stream adds to an FSM
// apply (a client alloc update: one alloc changed, one event) without a
// buffer, with a buffer and no subscriber, and with 100 subscribers that
// read and JSON-encode every event as /v1/event/stream does. ns/op is the
// apply latency; events/s is what the subscribers received together.
func BenchmarkApplyEvents(b *testing.B) {
	for _, bc := range []struct {
		name   string
		buffer bool
		subs   int
	}{{"no-buffer", false, 0}, {"buffer-0-subs", true, 0}, {"buffer-100-subs", true, 100}} {
		b.Run(bc.name, func(b *testing.B) {
			f, _ := testFSM(b)
			var buf *events.Buffer
			if bc.buffer {
				buf = events.NewBuffer(0, 0)
				f.SetEventBuffer(buf)
			}
			job := mockJob("batch")
			job.Namespace = structs.DefaultNamespace
			mustApply(b, f, 1, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
			alloc := mockAlloc(job, "node-1")
			alloc.Job = job
			mustApply(b, f, 2, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{alloc}})
			entries := make([][]byte, 2)
			for i, st := range []string{structs.AllocClientStatusRunning, structs.AllocClientStatusPending} {
				upd := &structs.Allocation{ID: alloc.ID, Namespace: alloc.Namespace, JobID: job.ID, TaskGroup: "web", NodeID: "node-1", ClientStatus: st}
				e, err := Encode(structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{upd}})
				must(b, err)
				entries[i] = e
			}

			var delivered, dropped atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range bc.subs {
				sub, err := buf.Subscribe(3, nil)
				must(b, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					readEvents(ctx, buf, sub, &delivered, &dropped, nil)
				}()
			}
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if resp := f.Apply(rawLog(uint64(3+i), entries[i%2])); resp != nil {
					b.Fatal(resp)
				}
			}
			b.StopTimer()
			// Let the readers drain what was published, within a bound.
			want := int64(b.N * bc.subs)
			deadline := time.Now().Add(10 * time.Second)
			tick := time.NewTicker(time.Millisecond)
			for delivered.Load() < want && time.Now().Before(deadline) && dropped.Load() == 0 {
				<-tick.C
			}
			tick.Stop()
			elapsed := time.Since(start)
			cancel()
			wg.Wait()
			if bc.subs > 0 {
				b.ReportMetric(float64(delivered.Load())/elapsed.Seconds(), "events/s")
				b.ReportMetric(float64(dropped.Load()), "drops")
			}
		})
	}
}

// readEvents is one subscriber of the benchmarks, reading until ctx ends
// as /v1/event/stream does: it JSON-encodes every event, counts them in
// delivered, and after falling a ring behind (counted in dropped)
// resubscribes at the head. read, when set, is told each batch's index.
func readEvents(ctx context.Context, buf *events.Buffer, sub *events.Subscription, delivered, dropped *atomic.Int64, read func(index uint64)) {
	defer func() { sub.Close() }()
	for {
		batch, err := sub.Next(ctx)
		if errors.Is(err, events.ErrSubscriberLagged) {
			dropped.Add(1)
			sub.Close()
			if sub, err = buf.Subscribe(^uint64(0), nil); err != nil {
				return
			}
			continue
		}
		if err != nil {
			return
		}
		for _, e := range batch.Events {
			if _, err := e.JSON(); err != nil {
				panic(err)
			}
		}
		delivered.Add(int64(len(batch.Events)))
		if read != nil {
			read(batch.Index)
		}
	}
}

func rawLog(index uint64, data []byte) *raft.Log {
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// BenchmarkDispatchBurstEvents measures the event stream's fan-out during
// a burst of 1,000 dispatches of a parameterized job (each a child job
// and its evaluation, one log entry as Job.Dispatch writes it) applied
// back to back, with 100 subscribers that read and JSON-encode every
// event as /v1/event/stream does, on the default ring. An op is one
// burst, from its first apply until every subscriber has read its last
// event. It reports the events the subscribers received together per
// second (events/s), the time the burst's applies took (apply-ms), the
// subscribers that fell a ring behind (drops),
// the bytes allocated per burst by the FSM, the buffer and the
// subscribers together (B/op), and the heap in use right after a burst's
// applies (heap-MB, the most of any burst) and once every burst is read
// and collected (retained-MB: the state store with the dispatched jobs
// and the ring's last 1,024 batches).
func BenchmarkDispatchBurstEvents(b *testing.B) {
	// Without subscribers, for the apply time the fan-out adds to.
	for _, subs := range []int{0, 100} {
		b.Run(fmt.Sprintf("subs-%d", subs), func(b *testing.B) { dispatchBurst(b, 1000, subs) })
	}
}

func dispatchBurst(b *testing.B, dispatches, subs int) {
	f, _ := testFSM(b)
	buf := events.NewBuffer(0, 0)
	f.SetEventBuffer(buf)
	parent := mockJob("batch")
	parent.Namespace = structs.DefaultNamespace
	parent.ParameterizedJob = &structs.ParameterizedJobConfig{Payload: "optional", MetaOptional: []string{"who"}}
	mustApply(b, f, 1, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent})
	index := uint64(1)

	// Every subscriber records the last index it read; a burst is read
	// when the slowest has read its last entry.
	seen := make([]atomic.Uint64, subs)
	var delivered, dropped atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range subs {
		sub, err := buf.Subscribe(index+1, nil)
		must(b, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			readEvents(ctx, buf, sub, &delivered, &dropped, func(index uint64) { seen[i].Store(index) })
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	readUpTo := func(last uint64) bool {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		deadline := time.After(time.Minute)
		for {
			slowest := last
			for i := range seen {
				slowest = min(slowest, seen[i].Load())
			}
			if slowest >= last || dropped.Load() > 0 {
				return slowest >= last
			}
			select {
			case <-tick.C:
			case <-deadline:
				return false
			}
		}
	}

	var ms runtime.MemStats
	var heapAfter, retained float64
	var elapsed, applying time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		b.StopTimer()
		// The burst's entries, encoded as the leader would before Raft.
		entries := make([][]byte, dispatches)
		for i := range entries {
			child := parent.Copy()
			child.ID = fmt.Sprintf("%s/dispatch-%d-%04d", parent.ID, n, i)
			child.ParentID, child.Dispatched = parent.ID, true
			child.ParameterizedJob = parent.ParameterizedJob
			child.Meta = map[string]string{"who": fmt.Sprint(i)}
			ev := mockEval(child.Namespace, child.ID, structs.EvalStatusPending)
			ev.Type = child.Type
			e, err := Encode(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: child, Eval: ev, Namespace: child.Namespace, JobID: child.ID})
			must(b, err)
			entries[i] = e
		}
		runtime.GC()
		b.StartTimer()
		start := time.Now()
		for _, e := range entries {
			index++
			if resp := f.Apply(rawLog(index, e)); resp != nil {
				b.Fatal(resp)
			}
		}
		applied := time.Since(start)
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		heapAfter = max(heapAfter, float64(ms.HeapInuse)/(1<<20))
		b.StartTimer()
		restart := time.Now()
		if !readUpTo(index) {
			b.Fatalf("the subscribers did not read the burst: %d drops", dropped.Load())
		}
		elapsed += applied + time.Since(restart)
		applying += applied
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	retained = float64(ms.HeapInuse) / (1 << 20)
	// The state store and the ring are what the heap retains.
	runtime.KeepAlive(f)
	runtime.KeepAlive(buf)
	if subs > 0 {
		b.ReportMetric(float64(delivered.Load())/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(delivered.Load())/float64(b.N*subs), "events/sub/burst")
		b.ReportMetric(float64(dropped.Load()), "drops")
	}
	b.ReportMetric(float64(applying.Milliseconds())/float64(b.N), "apply-ms")
	b.ReportMetric(heapAfter, "heap-MB")
	b.ReportMetric(retained, "retained-MB")
}
