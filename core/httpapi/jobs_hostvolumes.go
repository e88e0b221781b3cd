package httpapi

import (
	"net/http"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// allowHostVolumes reports whether the caller may mount the job's host
// volumes, as Nomad's job registration checks them: the host_volume
// rule of each volume's source grants mount-readonly for a read-only
// request, mount-readwrite otherwise (policy "read" and "write"). A
// namespace's write policy alone grants neither.
func allowHostVolumes(r *http.Request, job *structs.Job) bool {
	a := requestACL(r)
	if a == nil || a.IsManagement() || job == nil {
		return true
	}
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		for _, v := range tg.Volumes {
			if v == nil || v.Type != structs.VolumeTypeHost {
				continue
			}
			capability := acl.HostVolumeCapabilityMountReadWrite
			if v.ReadOnly {
				capability = acl.HostVolumeCapabilityMountReadOnly
			}
			if !a.AllowHostVolumeOperation(v.Source, capability) {
				return false
			}
		}
	}
	return true
}

// allowRevertHostVolumes is allowHostVolumes for the job version a revert
// registers again: reverting is registering that version, so it needs
// the same host volume rules. A version that is not found is the revert's
// to refuse.
func (s jobHandlers) allowRevertHostVolumes(r *http.Request, ns, id string, version uint64) bool {
	a := requestACL(r)
	if a == nil || a.IsManagement() {
		return true
	}
	j, err := s.srv.State().JobByIDAndVersion(nil, ns, id, version)
	if err != nil || j == nil {
		return true
	}
	return allowHostVolumes(r, j)
}
