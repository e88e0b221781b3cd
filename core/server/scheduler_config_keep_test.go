package server

import (
	"context"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// Nomad's TestOperator_SchedulerSetConfiguration reads back every switch it
// set, through Raft and the state store.
func TestSchedulerConfigKeepsNomadSwitches(t *testing.T) {
	s := testServer(t, nil)
	in := &structs.SchedulerConfiguration{
		SchedulerAlgorithm: "spread",
		PreemptionConfig: structs.PreemptionConfig{SystemSchedulerEnabled: true, SysBatchSchedulerEnabled: true,
			BatchSchedulerEnabled: true, ServiceSchedulerEnabled: true},
		MemoryOversubscriptionEnabled: true,
		RejectJobRegistration:         true,
		PauseEvalBroker:               true,
	}
	updated, _, err := s.Operator().SetSchedulerConfig(context.Background(), in, false, 0)
	if err != nil || !updated {
		t.Fatalf("SetSchedulerConfig = %v, %v", updated, err)
	}
	_, got, err := s.State().SchedulerConfig()
	if err != nil || got == nil {
		t.Fatalf("SchedulerConfig = %v, %v", got, err)
	}
	if got.SchedulerAlgorithm != "spread" || got.PreemptionConfig != in.PreemptionConfig ||
		!got.MemoryOversubscriptionEnabled || !got.RejectJobRegistration || !got.PauseEvalBroker {
		t.Errorf("kept %+v, want %+v", got, in)
	}
}
