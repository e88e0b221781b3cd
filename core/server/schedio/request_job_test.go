package schedio

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// Affinities, spreads and migrate.max_parallel reach the scheduler at every
// level they are written at, and stay unset for a job without them, so the
// requests of such jobs do not change.
func TestJobToPBPlacementBlocks(t *testing.T) {
	cases := []struct {
		name string
		edit func(*structs.Job)
		want func(*pb.Job)
	}{
		{"none", func(*structs.Job) {}, func(*pb.Job) {}},
		{"job level", func(j *structs.Job) {
			j.Affinities = []*structs.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Weight: -50}}
			j.Spreads = []*structs.Spread{{Attribute: "${node.datacenter}", Weight: 70, SpreadTarget: []*structs.SpreadTarget{{Value: "dc1", Percent: 70}, {Value: "dc2", Percent: 30}}}}
		}, func(p *pb.Job) {
			p.Affinities = []*pb.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Weight: -50}}
			p.Spreads = []*pb.Spread{{Attribute: "${node.datacenter}", Weight: 70, Targets: []*pb.SpreadTarget{{Value: "dc1", Percent: 70}, {Value: "dc2", Percent: 30}}}}
		}},
		{"group and task level", func(j *structs.Job) {
			tg := j.TaskGroups[0]
			tg.Affinities = []*structs.Affinity{{LTarget: "${meta.rack}", Operand: "set_contains", RTarget: "r1,r2", Weight: 100}}
			tg.Spreads = []*structs.Spread{{Attribute: "${meta.rack}", Weight: 50}}
			tg.Migrate = &structs.MigrateStrategy{MaxParallel: 2}
			tg.Tasks[0].Affinities = []*structs.Affinity{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux", Weight: 10}}
		}, func(p *pb.Job) {
			g := p.TaskGroups[0]
			g.Affinities = []*pb.Affinity{{LTarget: "${meta.rack}", Operand: "set_contains", RTarget: "r1,r2", Weight: 100}}
			g.Spreads = []*pb.Spread{{Attribute: "${meta.rack}", Weight: 50}}
			g.MigrateMaxParallel = 2
			g.Migrate = &pb.MigrateStrategy{MaxParallel: 2}
			g.Tasks[0].Affinities = []*pb.Affinity{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux", Weight: 10}}
		}},
		{"migrate block without max_parallel", func(j *structs.Job) {
			j.TaskGroups[0].Migrate = &structs.MigrateStrategy{}
		}, func(p *pb.Job) { p.TaskGroups[0].Migrate = &pb.MigrateStrategy{} }},
	}
	base := func() *structs.Job {
		return &structs.Job{ID: "web", Name: "web", Namespace: "default", Type: "service", TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}},
		}}}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := base()
			c.edit(j)
			want := jobToPB(base())
			c.want(want)
			if got := jobToPB(j); !proto.Equal(got, want) {
				t.Errorf("jobToPB =\n%v\nwant\n%v", got, want)
			}
		})
	}
}
