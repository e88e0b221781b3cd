package ui

type serversData struct {
	Peers  []Peer
	Leader string
}

// serversPage is /ui/servers: the Raft configuration, which needs
// operator:read as GET /v1/operator/raft/configuration does.
func (u *UI) serversPage(q *request) (*view, error) {
	if !q.allowOperatorRead() {
		return nil, forbidden("Your token may not read the Raft configuration (operator:read).")
	}
	d := &serversData{}
	if u.cfg.LeaderAddr != nil {
		d.Leader = u.cfg.LeaderAddr()
	}
	if u.cfg.Peers != nil {
		peers, err := u.cfg.Peers()
		if err != nil {
			return nil, err
		}
		d.Peers = peers
	} else if d.Leader != "" {
		d.Peers = []Peer{{ID: d.Leader, Address: d.Leader, Leader: true, Voter: true}}
	}
	return &view{tmpl: "servers", title: "Servers", data: d}, nil
}
