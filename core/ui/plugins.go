package ui

import (
	"strings"

	"github.com/drover-org/drover/core/acl"

	"github.com/drover-org/drover/core/structs"
)

type agentPluginRow struct {
	structs.AgentPlugin
	Types string
}

type pluginsData struct {
	// Agent is nil when the token may not read the agent (agent:read).
	Agent     []agentPluginRow
	AgentOK   bool
	CSI       []*structs.CSIPlugin
	CSIOK     bool
	HasAgentP bool
}

// pluginsPage is /ui/plugins: this agent's own plugins (agent:read, as
// GET /v1/agent/plugins) and the cluster's CSI plugins (plugin:list, as
// GET /v1/plugins). A token that may see one of the two sees that one and
// is told about the other; one that may see neither gets a 403.
func (u *UI) pluginsPage(q *request) (*view, error) {
	d := &pluginsData{AgentOK: q.allowAgentRead(), CSIOK: q.allowPluginList(), HasAgentP: u.cfg.AgentPlugins != nil}
	if !d.AgentOK && !d.CSIOK {
		return nil, forbidden("Your token may not read this agent's plugins (it needs agent:read) nor list CSI plugins (plugin:list).")
	}
	if d.AgentOK && u.cfg.AgentPlugins != nil {
		for _, p := range u.cfg.AgentPlugins() {
			var types []string
			for _, jt := range p.JobTypes {
				types = append(types, jt.Name)
			}
			d.Agent = append(d.Agent, agentPluginRow{AgentPlugin: p, Types: strings.Join(types, ", ")})
		}
	}
	if d.CSIOK {
		ps, err := q.st.CSIPlugins(nil, "")
		if err != nil {
			return nil, err
		}
		d.CSI = ps
	}
	return &view{tmpl: "plugins", title: "Plugins", data: d}, nil
}

type csiInstance struct {
	NodeID string
	*structs.CSIInfo
}

type csiPluginData struct {
	Plugin      *structs.CSIPlugin
	Controllers []csiInstance
	Nodes       []csiInstance
	Volumes     []*structs.CSIVolume
	// HiddenVolumes counts the plugin's volumes in namespaces the token
	// may not list volumes in.
	HiddenVolumes int
}

// csiPluginPage is /ui/plugins/csi/<id>: needs plugin:read, as GET
// /v1/plugin/csi/<id>.
func (u *UI) csiPluginPage(q *request) (*view, error) {
	if !q.allowPluginRead() {
		return nil, forbidden("Your token may not read CSI plugins (it needs plugin:read).")
	}
	id := q.PathValue("id")
	p, err := q.st.CSIPluginByID(nil, id)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, notFound("No CSI plugin %s.", id)
	}
	d := &csiPluginData{Plugin: p}
	for _, n := range sortedKeys(p.Controllers) {
		d.Controllers = append(d.Controllers, csiInstance{n, p.Controllers[n]})
	}
	for _, n := range sortedKeys(p.Nodes) {
		d.Nodes = append(d.Nodes, csiInstance{n, p.Nodes[n]})
	}
	vols, err := q.st.CSIVolumes(nil, "*", "", id)
	if err != nil {
		return nil, err
	}
	for _, v := range vols {
		if q.allowNS(v.Namespace, acl.NamespaceCapabilityCSIListVolume) {
			d.Volumes = append(d.Volumes, v)
		} else {
			d.HiddenVolumes++
		}
	}
	return &view{tmpl: "csiplugin", title: "CSI plugin " + p.ID, data: d}, nil
}
