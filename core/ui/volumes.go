package ui

import (
	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// volumeRow is a volume with its claims counted: a claim being released
// is counted as releasing, not as a current read or write.
type volumeRow struct {
	*structs.CSIVolume
	Reads, Writes, Releasing int
}

func newVolumeRow(v *structs.CSIVolume) volumeRow {
	r := volumeRow{CSIVolume: v, Releasing: len(v.PastClaims)}
	for id := range v.ReadClaims {
		if v.PastClaims[id] == nil {
			r.Reads++
		}
	}
	for id := range v.WriteClaims {
		if v.PastClaims[id] == nil {
			r.Writes++
		}
	}
	return r
}

type volumesData struct {
	Rows []volumeRow
}

// volumesPage is /ui/volumes: the CSI volumes of every namespace the
// token may list volumes in (csi-list-volume, as GET /v1/volumes).
func (u *UI) volumesPage(q *request) (*view, error) {
	allowed, err := readableNamespaces(q, acl.NamespaceCapabilityCSIListVolume)
	if err != nil {
		return nil, err
	}
	if len(allowed) == 0 {
		return nil, forbidden("Your token may not list volumes in any namespace (it needs csi-list-volume).")
	}
	vols, err := q.st.CSIVolumes(nil, "*", "", "")
	if err != nil {
		return nil, err
	}
	d := &volumesData{}
	for _, v := range vols {
		if allowed[v.Namespace] {
			d.Rows = append(d.Rows, newVolumeRow(v))
		}
	}
	return &view{tmpl: "volumes", title: "Volumes", data: d}, nil
}

// claimRow is one claim of a volume: current (read or write) or past
// (being released).
type claimRow struct {
	*structs.CSIVolumeClaim
	Kind  string // "read", "write" or "past"
	Alloc *structs.Allocation
}

type volumeData struct {
	Volume *structs.CSIVolume
	Claims []claimRow
	Past   []claimRow
}

// volumePage is /ui/volumes/<ns>/<id>: needs csi-read-volume in <ns>, as
// GET /v1/volume/csi/<id>.
func (u *UI) volumePage(q *request) (*view, error) {
	ns, id := q.PathValue("ns"), q.PathValue("id")
	if !q.allowNS(ns, acl.NamespaceCapabilityCSIReadVolume) {
		return nil, forbidden("Your token may not read volumes in namespace %s (it needs csi-read-volume).", ns)
	}
	v, err := q.st.CSIVolumeByID(nil, ns, id)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound("No volume %s in namespace %s.", id, ns)
	}
	d := &volumeData{Volume: v}
	rows := func(kind string, claims map[string]*structs.CSIVolumeClaim) ([]claimRow, error) {
		var out []claimRow
		for _, k := range sortedKeys(claims) {
			c := claims[k]
			if kind != "past" && v.PastClaims[k] != nil {
				continue // being released: listed with the past claims
			}
			r := claimRow{CSIVolumeClaim: c, Kind: kind}
			if c.AllocationID != "" {
				a, err := q.st.AllocByID(nil, c.AllocationID)
				if err != nil {
					return nil, err
				}
				r.Alloc = a
			}
			out = append(out, r)
		}
		return out, nil
	}
	for _, part := range []struct {
		kind   string
		claims map[string]*structs.CSIVolumeClaim
		into   *[]claimRow
	}{{"write", v.WriteClaims, &d.Claims}, {"read", v.ReadClaims, &d.Claims}, {"past", v.PastClaims, &d.Past}} {
		r, err := rows(part.kind, part.claims)
		if err != nil {
			return nil, err
		}
		*part.into = append(*part.into, r...)
	}
	return &view{tmpl: "volume", title: "Volume " + v.ID, data: d}, nil
}
