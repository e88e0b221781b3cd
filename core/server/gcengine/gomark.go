package gcengine

import "runtime/metrics"

// goMarkWatch tells whether Go's own garbage collector is marking. A
// collection cycle stops the world twice, when its mark phase starts and
// when it ends, and is counted in /gc/cycles/total when it ends: one GC
// pause more than twice the cycles is a mark phase in progress. runtime/
// metrics has no direct answer; this one is cheap (no stop of the world)
// and exact but for the instants of the two pauses.
//
// The GC engine waits while Go marks (Pacing.MarkWait): a mark phase on
// the heap of a large state takes seconds, and a reap step then competes
// for the CPU with both the marking and the placements, which is where the
// slowest placements were measured (BenchmarkGCSchedulingLatency).
type goMarkWatch struct {
	samples []metrics.Sample
}

func newGoMarkWatch() *goMarkWatch {
	return &goMarkWatch{samples: []metrics.Sample{
		{Name: "/sched/pauses/total/gc:seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}}
}

// marking reads the runtime's counters; not safe for concurrent use.
func (w *goMarkWatch) marking() bool {
	metrics.Read(w.samples)
	if w.samples[0].Value.Kind() != metrics.KindFloat64Histogram || w.samples[1].Value.Kind() != metrics.KindUint64 {
		return false // a runtime without these metrics: never waits
	}
	var pauses uint64
	for _, c := range w.samples[0].Value.Float64Histogram().Counts {
		pauses += c
	}
	return markInProgress(pauses, w.samples[1].Value.Uint64())
}

func markInProgress(pauses, cycles uint64) bool { return pauses > 2*cycles }
