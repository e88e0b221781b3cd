package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
)

// The cluster commands: `drover server members` and `drover operator raft
// list-peers|remove-peer`, over Nomad's /v1/agent/members and
// /v1/operator/raft/* endpoints.

// agentMember is one server in GET /v1/agent/members.
type agentMember struct {
	Name   string
	Addr   string
	Port   int
	Tags   map[string]string
	Status string
}

// serverMembers is the body of GET /v1/agent/members.
type serverMembers struct {
	ServerName   string
	ServerRegion string
	ServerDC     string
	Members      []*agentMember
}

// raftServer is one entry of GET /v1/operator/raft/configuration.
type raftServer struct {
	ID           string
	Node         string
	Address      string
	Leader       bool
	Voter        bool
	RaftProtocol string
}

// raftConfiguration is the body of GET /v1/operator/raft/configuration.
type raftConfiguration struct {
	Servers []*raftServer
	Index   uint64
}

// ServerMembersCommand is `drover server members`.
type ServerMembersCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ServerMembersCommand) Synopsis() string {
	return "Display a list of the known servers and their status"
}

const serverMembersHelp = `
Usage: drover server members [options]

  Lists the servers of the cluster the agent belongs to, with their status
  and which one leads.

Server Members Options:

  -verbose
    Show each server's tags instead of the summary columns.

  -json
    Print the API's JSON instead.`

func (c *ServerMembersCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("server members", serverMembersHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/agent/members", "servers")
	}
	var resp serverMembers
	if _, err := client.Get(ctx, "/v1/agent/members", nil, &resp); err != nil {
		return c.ui.Errorf("Error querying servers: %s", err)
	}
	sort.Slice(resp.Members, func(i, j int) bool { return resp.Members[i].Name < resp.Members[j].Name })
	if verbose {
		c.ui.Printf("%s\n", formatMemberTags(resp.Members))
		return cli.ExitOK
	}
	leaders, err := memberLeaders(ctx, client, resp.Members)
	if err != nil {
		return c.ui.Errorf("Error determining leaders: %s", err)
	}
	c.ui.Printf("%s\n", formatMembers(resp.Members, leaders))
	return cli.ExitOK
}

// memberLeaders reports which members lead their region. drover tags the
// leader directly; a member without that tag (from a Nomad agent, say) is
// matched, as Nomad's CLI does, against the RPC address that
// /v1/status/leader names for its region.
func memberLeaders(ctx context.Context, client *cli.APIClient, members []*agentMember) (map[*agentMember]bool, error) {
	out := make(map[*agentMember]bool, len(members))
	regionLeader := map[string]string{}
	for _, m := range members {
		if v, ok := m.Tags["leader"]; ok {
			out[m] = v == "true"
			continue
		}
		region := m.Tags["region"]
		leader, ok := regionLeader[region]
		if !ok {
			q := url.Values{}
			if region != "" {
				q.Set("region", region)
			}
			_, err := client.Get(ctx, "/v1/status/leader", q, &leader)
			switch {
			case isNoLeader(err):
				leader = ""
			case err != nil:
				return nil, err
			}
			regionLeader[region] = leader
		}
		out[m] = leader != "" && leader == net.JoinHostPort(m.Addr, m.Tags["port"])
	}
	return out, nil
}

// isNoLeader reports whether err is the agent's "no leader" answer, which
// for this table only means that nobody leads.
func isNoLeader(err error) bool {
	var ae *cli.APIError
	return errors.As(err, &ae) && strings.Contains(ae.Body, "No cluster leader")
}

func formatMembers(members []*agentMember, leaders map[*agentMember]bool) string {
	rows := []string{"Name|Address|Port|Status|Leader|Raft Version|Build|Datacenter|Region"}
	for _, m := range members {
		rows = append(rows, fmt.Sprintf("%s|%s|%d|%s|%t|%s|%s|%s|%s", m.Name, m.Addr, m.Port, m.Status, leaders[m],
			orNA(m.Tags["raft_vsn"]), orNA(m.Tags["build"]), orNA(m.Tags["dc"]), orNA(m.Tags["region"])))
	}
	return cli.FormatList(rows)
}

func formatMemberTags(members []*agentMember) string {
	rows := []string{"Name|Address|Port|Status|Tags"}
	for _, m := range members {
		tags := make([]string, 0, len(m.Tags))
		for k, v := range m.Tags {
			tags = append(tags, k+"="+v)
		}
		sort.Strings(tags)
		rows = append(rows, fmt.Sprintf("%s|%s|%d|%s|%s", m.Name, m.Addr, m.Port, m.Status, strings.Join(tags, ",")))
	}
	return cli.FormatList(rows)
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

// OperatorRaftListPeersCommand is `drover operator raft list-peers`.
type OperatorRaftListPeersCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorRaftListPeersCommand) Synopsis() string {
	return "Display the current Raft peer configuration"
}

const raftListPeersHelp = `
Usage: drover operator raft list-peers [options]

  Displays the servers of the Raft configuration, which one leads and which
  ones vote.

List Peers Options:

  -stale
    Let the agent answer from its own state instead of the leader's, which
    works when the cluster has no leader.

  -json
    Print the API's JSON instead.`

func (c *OperatorRaftListPeersCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator raft list-peers", raftListPeersHelp)
	var asJSON, stale bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&stale, "stale", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	q := url.Values{}
	if stale {
		q.Set("stale", "true")
	}
	const path = "/v1/operator/raft/configuration"
	if asJSON {
		raw, err := client.GetRaw(ctx, path, q)
		if err != nil {
			return c.ui.Errorf("Failed to retrieve raft configuration: %s", err)
		}
		c.ui.Printf("%s\n", cli.PrettyJSON(raw))
		return cli.ExitOK
	}
	var conf raftConfiguration
	if _, err := client.Get(ctx, path, q, &conf); err != nil {
		return c.ui.Errorf("Failed to retrieve raft configuration: %s", err)
	}
	c.ui.Printf("%s\n", formatRaftPeers(conf.Servers))
	return cli.ExitOK
}

func formatRaftPeers(servers []*raftServer) string {
	rows := []string{"Node|ID|Address|State|Voter|RaftProtocol"}
	for _, s := range servers {
		state := "follower"
		if s.Leader {
			state = "leader"
		}
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%s|%t|%s", s.Node, s.ID, s.Address, state, s.Voter, orNA(s.RaftProtocol)))
	}
	return cli.FormatList(rows)
}

// OperatorRaftRemovePeerCommand is `drover operator raft remove-peer`.
type OperatorRaftRemovePeerCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorRaftRemovePeerCommand) Synopsis() string {
	return "Remove a server from the Raft configuration"
}

const raftRemovePeerHelp = `
Usage: drover operator raft remove-peer [options]

  Removes a server from the Raft configuration. Use it for a server that
  failed and will not come back: a server that leaves cleanly removes
  itself, and a live server that is removed may rejoin.

Remove Peer Options:

  -peer-address=<host:port>
    The RPC address of the server to remove.

  -peer-id=<id>
    The Raft ID of the server to remove.`

func (c *OperatorRaftRemovePeerCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator raft remove-peer", raftRemovePeerHelp)
	var addr, id string
	fs.StringVar(&addr, "peer-address", "", "")
	fs.StringVar(&id, "peer-id", "", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() != 0:
		return c.UsageError(fs, "This command takes no arguments")
	case addr == "" && id == "":
		return c.UsageError(fs, "Missing peer address/ID")
	case addr != "" && id != "":
		return c.UsageError(fs, "Cannot give both -peer-address and -peer-id")
	}
	q, what, value := url.Values{}, "address", addr
	if id != "" {
		what, value = "id", id
	}
	q.Set(what, value)
	if err := c.Client().Write(context.Background(), http.MethodDelete, "/v1/operator/raft/peer", q, nil, nil); err != nil {
		return c.ui.Errorf("Error removing peer: %s", err)
	}
	c.ui.Printf("Removed peer with %s %s\n", what, strconv.Quote(value))
	return cli.ExitOK
}
