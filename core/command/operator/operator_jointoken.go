package operator

import (
	"context"
	"net/http"

	"github.com/drover-org/drover/core/command/cli"
)

// OperatorJoinTokenCommand is `drover operator join-token [-rotate] server|client`.
type OperatorJoinTokenCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorJoinTokenCommand) Synopsis() string {
	return "Show or rotate the cluster's join tokens"
}

const operatorJoinTokenHelp = `
Usage: drover operator join-token [options] server|client

  Prints the cluster's join token for servers or clients. A new server
  joins with server_join { token = "..." }, a new client with
  client { join_token = "..." }; the token lets the agent obtain its
  certificate of the cluster CA. The token is a secret: anyone holding the
  client token can join a node, anyone holding the server token a server.

Options:

  -rotate
    Replace the token with a new one and print it. The old token no longer
    joins; agents that joined keep their certificates and keep running.`

func (c *OperatorJoinTokenCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator join-token", operatorJoinTokenHelp)
	var rotate bool
	fs.BoolVar(&rotate, "rotate", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "server" && fs.Arg(0) != "client") {
		return c.UsageError(fs, "This command takes one argument: server or client")
	}
	client := c.Client()
	ctx := context.Background()
	path := "/v1/operator/join-token/" + fs.Arg(0)
	var resp struct{ Role, Token string }
	var err error
	if rotate {
		err = client.Write(ctx, http.MethodPut, path+"/rotate", nil, nil, &resp)
	} else {
		_, err = client.Get(ctx, path, nil, &resp)
	}
	if err != nil {
		return c.ui.Errorf("Error reading the %s join token: %s", fs.Arg(0), err)
	}
	c.ui.Printf("%s\n", resp.Token)
	return cli.ExitOK
}
