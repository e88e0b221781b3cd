package schedio

import (
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// jobHostVolumes is the set of host volume names the job's groups ask for:
// the source, or for per_alloc each index's "<source>[<i>]" below the
// count. nil when the job asks for none.
func jobHostVolumes(job *structs.Job) map[string]bool {
	var out map[string]bool
	for _, tg := range job.TaskGroups {
		for _, v := range tg.Volumes {
			if v == nil || v.Type != structs.VolumeTypeHost || v.Source == "" {
				continue
			}
			if out == nil {
				out = map[string]bool{}
			}
			if !v.PerAlloc {
				out[v.Source] = true
				continue
			}
			for i := range tg.Count {
				out[v.VolumeID(structs.AllocName(job.ID, tg.Name, i))] = true
			}
		}
	}
	return out
}

// nodeHostVolumes is the node's host volumes among want.
func nodeHostVolumes(n *structs.Node, want map[string]bool) map[string]*pb.HostVolume {
	if len(want) == 0 || len(n.HostVolumes) == 0 {
		return nil
	}
	var out map[string]*pb.HostVolume
	for name := range want {
		v := n.HostVolumes[name]
		if v == nil {
			continue
		}
		if out == nil {
			out = map[string]*pb.HostVolume{}
		}
		out[name] = &pb.HostVolume{ReadOnly: v.ReadOnly}
	}
	return out
}
