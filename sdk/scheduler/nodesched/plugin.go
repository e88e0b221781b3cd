package nodesched

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// Identity is what a scheduler plugin built on the engine reports in Info:
// its name and version and the one job type it serves, with the number of
// scheduling attempts the core makes for one eval of that type.
type Identity struct {
	Name        string
	Version     string
	JobType     string
	MaxAttempts int32
	// Declares is the rest of the job type's declaration: how its jobs
	// behave once placed. Info fills its name, max_attempts and per_node
	// from the fields above.
	Declares *schedulerpb.JobTypeInfo
}

// Plugin is a scheduler.Scheduler that serves one job type with an Engine.
// The system and sysbatch plugins differ only in their Identity and
// Options, so they embed a Plugin rather than each restating Info and
// Schedule. It is stateless and safe for concurrent use.
type Plugin struct {
	id     Identity
	engine *Engine
}

var _ scheduler.Scheduler = (*Plugin)(nil)

// NewPlugin returns a Plugin that reports id and schedules with an Engine
// configured by opts.
func NewPlugin(id Identity, opts Options) *Plugin {
	return &Plugin{id: id, engine: New(opts)}
}

// Info reports the plugin's name, version and job type. The engine places
// each group's count on every candidate node, so the type is per node.
func (p *Plugin) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	jt := &schedulerpb.JobTypeInfo{}
	if p.id.Declares != nil {
		jt = proto.Clone(p.id.Declares).(*schedulerpb.JobTypeInfo)
	}
	jt.Name, jt.MaxAttempts, jt.PerNode = p.id.JobType, p.id.MaxAttempts, true
	return &schedulerpb.InfoResponse{
		Name:     p.id.Name,
		Version:  p.id.Version,
		JobTypes: []*schedulerpb.JobTypeInfo{jt},
	}, nil
}

// Schedule makes one scheduling attempt for one evaluation. A canceled
// context is an error: the core has given up on the attempt.
func (p *Plugin) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.engine.Schedule(req)
}
