package httpapi

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// csiHandlers serves the CSI routes: /v1/volumes, /v1/volume/csi/*,
// /v1/plugins and /v1/plugin/csi/{id}. Its handlers reach the server through
// the embedded pointer.
type csiHandlers struct{ *HTTPServer }

// CSIServer (Config.CSI) writes CSI volumes.
type CSIServer interface {
	RegisterCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) (uint64, error)
	DeregisterCSIVolumes(ctx context.Context, ns string, ids []string, force bool) (uint64, error)
	CreateCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) ([]*structs.CSIVolume, uint64, error)
	DeleteCSIVolume(ctx context.Context, ns, id string, secrets map[string]string) (uint64, error)
	DetachCSIVolume(ctx context.Context, ns, id, nodeID string) (uint64, error)
}

// volumeList is GET /v1/volumes?type=csi[&prefix=&plugin_id=&node_id=].
// Without a type, or for host volumes (which drover does not have), the
// list is empty, as in Nomad.
func (s csiHandlers) volumeList(w http.ResponseWriter, r *http.Request) {
	switch t := r.URL.Query().Get("type"); t {
	case "csi":
	case "", "host":
		s.blockingRead(w, r, func(queryOptions) readFunc {
			return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
				return st.Index(state.TableCSIVolumes), []*structs.CSIVolListStub{}, nil
			}
		})
		return
	default:
		writeText(w, http.StatusNotFound, "unsupported volume type: "+strconv.Quote(t))
		return
	}
	pluginID, nodeID := r.URL.Query().Get("plugin_id"), r.URL.Query().Get("node_id")
	allow := nsFilter(r, acl.NamespaceCapabilityCSIListVolume)
	readList(s.HTTPServer, w, r, state.TableCSIVolumes, func(vols []*structs.CSIVolume) any {
		stubs := make([]*structs.CSIVolListStub, 0, len(vols))
		for _, v := range vols {
			stubs = append(stubs, v.Stub())
		}
		return stubs
	}, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.CSIVolume, error) {
		vols, err := st.CSIVolumes(ws, q.Namespace, q.Prefix, pluginID)
		if err != nil {
			return nil, err
		}
		vols = filterNS(vols, func(v *structs.CSIVolume) string { return v.Namespace }, allow)
		if nodeID != "" {
			out := vols[:0]
			for _, v := range vols {
				if volumeOnNode(v, nodeID) {
					out = append(out, v)
				}
			}
			vols = out
		}
		return vols, nil
	})
}

// volumeOnNode reports whether a (denormalized) volume has a current
// claim on node.
func volumeOnNode(v *structs.CSIVolume, node string) bool {
	for _, claims := range []map[string]*structs.CSIVolumeClaim{v.ReadClaims, v.WriteClaims} {
		for _, c := range claims {
			if c != nil && c.NodeID == node {
				return true
			}
		}
	}
	return false
}

// csiVolumeJSON is a volume as the API shows it: secrets and mount flags
// redacted, the claiming allocations as the caller may see them, and
// their stubs in Allocations, as Nomad's client expects.
type csiVolumeJSON struct {
	*structs.CSIVolume
	Allocations []*structs.AllocListStub
}

func newCSIVolumeJSON(r *http.Request, v *structs.CSIVolume) csiVolumeJSON {
	c := v.Redacted()
	view := allocView(r)
	var allocs []*structs.Allocation
	for _, m := range []map[string]*structs.Allocation{c.ReadAllocs, c.WriteAllocs} {
		for id, a := range m {
			if a == nil || !allowNS(r, a.Namespace, acl.NamespaceCapabilityReadJob) {
				m[id] = nil
				continue
			}
			m[id] = view(a)
			allocs = append(allocs, a)
		}
	}
	return csiVolumeJSON{CSIVolume: c, Allocations: allocStubs(allocs)}
}

func (s csiHandlers) volumeGet(w http.ResponseWriter, r *http.Request) {
	id, ns := r.PathValue("id"), namespaceOf("", r)
	readObject(s.HTTPServer, w, r, state.TableCSIVolumes, "volume not found",
		func(v *structs.CSIVolume) (uint64, any) { return v.ModifyIndex, newCSIVolumeJSON(r, v) },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.CSIVolume, error) {
			return st.CSIVolumeByID(ws, ns, id)
		})
}

func (s csiHandlers) csiServer(w http.ResponseWriter) (CSIServer, bool) {
	cs := s.csi
	if cs == nil || s.srv == nil {
		writeText(w, http.StatusNotImplemented, "This agent's server does not write CSI volumes")
		return nil, false
	}
	return cs, true
}

// csiVolumeRegisterBody is Nomad's CSIVolumeRegisterRequest.
type csiVolumeRegisterBody struct {
	Volumes        []*structs.CSIVolume
	PolicyOverride bool
}

// volumeRegister is PUT /v1/volume/csi/{id}: the body's one volume must
// carry the path's ID.
func (s csiHandlers) volumeRegister(w http.ResponseWriter, r *http.Request) {
	s.registerVolumes(w, r, r.PathValue("id"))
}

// volumesRegister is PUT /v1/volumes, any number of volumes.
func (s csiHandlers) volumesRegister(w http.ResponseWriter, r *http.Request) {
	s.registerVolumes(w, r, "")
}

// volumeCreate is PUT /v1/volume/csi/{id}/create: the controller
// provisions the body's one volume, which is then registered.
func (s csiHandlers) volumeCreate(w http.ResponseWriter, r *http.Request) {
	s.writeVolumes(w, r, r.PathValue("id"), true)
}

func (s csiHandlers) registerVolumes(w http.ResponseWriter, r *http.Request, pathID string) {
	s.writeVolumes(w, r, pathID, false)
}

func (s csiHandlers) writeVolumes(w http.ResponseWriter, r *http.Request, pathID string, create bool) {
	cs, ok := s.csiServer(w)
	if !ok {
		return
	}
	var body csiVolumeRegisterBody
	if err := decodeBody(r, &body); err != nil {
		s.writeError(w, err)
		return
	}
	if len(body.Volumes) == 0 {
		writeText(w, http.StatusBadRequest, "Volumes: at least one volume is required")
		return
	}
	if pathID != "" && (len(body.Volumes) != 1 || body.Volumes[0] == nil || body.Volumes[0].ID != pathID) {
		writeText(w, http.StatusBadRequest, "Volume ID does not match request path")
		return
	}
	reqNS := r.URL.Query().Get("namespace")
	for _, v := range body.Volumes {
		if v == nil {
			writeText(w, http.StatusBadRequest, "Volumes: a volume is null")
			return
		}
		switch {
		case v.Namespace == "" && (reqNS == "" || reqNS == state.AllNamespaces):
			v.Namespace = structs.DefaultNamespace
		case v.Namespace == "":
			v.Namespace = reqNS
		case reqNS != "" && reqNS != state.AllNamespaces && reqNS != v.Namespace:
			writeText(w, http.StatusBadRequest, "volume "+strconv.Quote(v.ID)+": namespace "+strconv.Quote(v.Namespace)+
				" does not match the request's "+strconv.Quote(reqNS))
			return
		}
		a := requestACL(r)
		if a != nil && (!a.AllowNamespaceOperation(v.Namespace, acl.NamespaceCapabilityCSIWriteVolume) || !a.AllowPluginRead()) {
			s.writeError(w, errPermissionDenied)
			return
		}
	}
	out := []*structs.CSIVolume{}
	var idx uint64
	var err error
	if create {
		var vols []*structs.CSIVolume
		vols, idx, err = cs.CreateCSIVolumes(r.Context(), body.Volumes)
		for _, v := range vols {
			out = append(out, v.Redacted())
		}
	} else {
		idx, err = cs.RegisterCSIVolumes(r.Context(), body.Volumes)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct {
		Volumes  []*structs.CSIVolume
		Warnings string
		Index    uint64
	}{Volumes: out, Index: idx})
}

// volumeDelete is DELETE /v1/volume/csi/{id}/delete: the controller
// deletes the unclaimed volume, which is then deregistered. Secrets come
// in the X-Nomad-CSI-Secrets header (k=v,k2=v2).
func (s csiHandlers) volumeDelete(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.csiServer(w)
	if !ok {
		return
	}
	var secrets map[string]string
	if h := r.Header.Get("X-Nomad-CSI-Secrets"); h != "" {
		secrets = map[string]string{}
		for _, kv := range strings.Split(h, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				writeText(w, http.StatusBadRequest, "X-Nomad-CSI-Secrets: each entry must be key=value")
				return
			}
			secrets[k] = v
		}
	}
	idx, err := cs.DeleteCSIVolume(r.Context(), namespaceOf("", r), r.PathValue("id"), secrets)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}

// volumeDetach is DELETE /v1/volume/csi/{id}/detach?node=<node ID>.
func (s csiHandlers) volumeDetach(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.csiServer(w)
	if !ok {
		return
	}
	node := r.URL.Query().Get("node")
	if node == "" {
		writeText(w, http.StatusBadRequest, "detach requires node ID")
		return
	}
	idx, err := cs.DetachCSIVolume(r.Context(), namespaceOf("", r), r.PathValue("id"), node)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}

// volumeDeregister is DELETE /v1/volume/csi/{id}[?force=true].
func (s csiHandlers) volumeDeregister(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.csiServer(w)
	if !ok {
		return
	}
	force := false
	if f := r.URL.Query().Get("force"); f != "" {
		var err error
		if force, err = strconv.ParseBool(f); err != nil {
			writeText(w, http.StatusBadRequest, "Invalid force value "+strconv.Quote(f)+": must be true or false")
			return
		}
	}
	idx, err := cs.DeregisterCSIVolumes(r.Context(), namespaceOf("", r), []string{r.PathValue("id")}, force)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}

// pluginList is GET /v1/plugins?type=csi; without that type the list is
// empty, as in Nomad.
func (s csiHandlers) pluginList(w http.ResponseWriter, r *http.Request) {
	csi := r.URL.Query().Get("type") == "csi"
	readList(s.HTTPServer, w, r, state.TableCSIPlugins, func(ps []*structs.CSIPlugin) any {
		stubs := make([]*structs.CSIPluginListStub, 0, len(ps))
		for _, p := range ps {
			stubs = append(stubs, p.Stub())
		}
		sort.Slice(stubs, func(i, j int) bool { return stubs[i].ID < stubs[j].ID })
		return stubs
	}, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.CSIPlugin, error) {
		if !csi {
			return nil, nil
		}
		return st.CSIPlugins(ws, q.Prefix)
	})
}

// pluginGet is GET /v1/plugin/csi/{id}, with the stubs of the plugin's
// allocations the caller may read.
func (s csiHandlers) pluginGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	readObject(s.HTTPServer, w, r, state.TableCSIPlugins, "plugin not found",
		func(p *structs.CSIPlugin) (uint64, any) { return p.ModifyIndex, p },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.CSIPlugin, error) {
			p, err := st.CSIPluginByID(ws, id)
			if p == nil || err != nil {
				return nil, err
			}
			c := p.Copy()
			var allocs []*structs.Allocation
			seen := map[string]bool{}
			for _, m := range []map[string]*structs.CSIInfo{p.Controllers, p.Nodes} {
				for _, info := range m {
					if info == nil || info.AllocID == "" || seen[info.AllocID] {
						continue
					}
					seen[info.AllocID] = true
					a, err := st.AllocByID(ws, info.AllocID)
					if err != nil {
						return nil, err
					}
					if a != nil && allowNS(r, a.Namespace, acl.NamespaceCapabilityReadJob) {
						allocs = append(allocs, a)
					}
				}
			}
			c.Allocations = allocStubs(allocs)
			return c, nil
		})
}
