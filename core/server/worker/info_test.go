package worker

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testwait"
)

// Info lists no worker before Run, each worker started and waiting for an
// eval while it runs, and each stopped once Run returned; ServedTypes and
// Workers are the router's and the config's.
func TestPoolInfo(t *testing.T) {
	p := New(Config{Workers: 3, Broker: newFakeBroker(), Schedulers: errRouter{}})
	if got := p.Info(); len(got) != 0 {
		t.Fatalf("Info before Run = %+v; want none", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	before := time.Now()
	go func() {
		defer close(ran)
		p.Run(ctx)
	}()
	testwait.For(t, 10*time.Second, "three started workers waiting to dequeue", func() bool {
		infos := p.Info()
		if len(infos) != 3 {
			return false
		}
		for _, in := range infos {
			if in.Status != StatusStarted || in.WorkloadStatus != WorkloadWaitingToDequeue || in.Started.Before(before.Add(-time.Second)) {
				return false
			}
		}
		return true
	})
	if p.Workers() != 3 || len(p.ServedTypes()) != 1 || p.ServedTypes()[0] != "service" {
		t.Errorf("Workers %d, ServedTypes %v; want 3 and [service]", p.Workers(), p.ServedTypes())
	}
	cancel()
	<-ran
	for _, in := range p.Info() {
		if in.Status != StatusStopped || in.WorkloadStatus != WorkloadStopped {
			t.Errorf("worker %s after Run: %s/%s; want Stopped", in.ID, in.Status, in.WorkloadStatus)
		}
	}
}
