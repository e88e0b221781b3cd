package fsm

import (
	"context"
	"errors"
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
					}
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
			for delivered.Load() < want && time.Now().Before(deadline) && dropped.Load() == 0 {
				time.Sleep(time.Millisecond) // benchmark drain, not test synchronisation
			}
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

func rawLog(index uint64, data []byte) *raft.Log {
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}
