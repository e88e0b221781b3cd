package command

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
)

// UICommand is `drover ui [-authenticate] [-show-url] [<job-id>]`.
type UICommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *UICommand) Synopsis() string { return "Open the web UI" }

const uiHelp = `
Usage: drover ui [options] [<job-id>]

  Opens the agent's web UI in a browser, or prints its address where no
  browser can be started. With a job ID (or a unique prefix of one) it
  opens that job's page.

UI Options:

  -authenticate
    Creates a one-time token from the current ACL token and adds it to the
    address (/ui/settings/tokens?ott=…), so that the browser signs in as
    the caller without the ACL token's secret ever appearing in the
    address. The one-time token expires after ten minutes and can be
    exchanged once: a second use of the address is refused.

  -show-url
    Prints the address instead of opening a browser.`

// oneTimeTokenResponse is the answer of PUT /v1/acl/token/onetime.
type oneTimeTokenResponse struct {
	OneTimeToken *struct {
		OneTimeSecretID string
		AccessorID      string
		ExpiresAt       time.Time
	}
}

func (c *UICommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("ui", uiHelp)
	var authenticate, showURL bool
	fs.BoolVar(&authenticate, "authenticate", false, "")
	fs.BoolVar(&showURL, "show-url", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return c.UsageError(fs, "This command takes at most one argument: <job-id>")
	}
	client := c.Client()
	u, err := url.Parse(client.Address)
	if err != nil {
		return c.ui.Errorf("Error parsing the agent address %q: %s", client.Address, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// page is the UI page to open, as a path and query under /ui/.
	page := &url.URL{Path: "/ui/jobs"}
	if ns := client.Namespace; ns != "" && ns != "default" {
		page.RawQuery = url.Values{"namespace": {ns}}.Encode()
	}
	if fs.NArg() == 1 {
		job, err := cli.ResolveJob(ctx, client, fs.Arg(0))
		if err != nil {
			return c.ui.Errorf("Error looking up job: %s", err)
		}
		page = &url.URL{Path: uiJobPath(job.Namespace, job.ID)}
	}
	target := page.Path
	if page.RawQuery != "" {
		target += "?" + page.RawQuery
	}
	if authenticate {
		if client.Token == "" {
			return c.ui.Errorf("Error: -authenticate needs an ACL token (-token, DROVER_TOKEN or NOMAD_TOKEN)")
		}
		var resp oneTimeTokenResponse
		if err := client.Write(ctx, "PUT", "/v1/acl/token/onetime", nil, nil, &resp); err != nil {
			return c.ui.Errorf("Error creating a one-time token: %s", err)
		}
		if resp.OneTimeToken == nil || resp.OneTimeToken.OneTimeSecretID == "" {
			return c.ui.Errorf("Error creating a one-time token: the agent answered without one")
		}
		q := url.Values{"ott": {resp.OneTimeToken.OneTimeSecretID}}
		if target != "/ui/jobs" {
			q.Set("next", target)
		}
		target = "/ui/settings/tokens?" + q.Encode()
	}
	// The paths are escaped already: join them as text.
	addr := strings.TrimSuffix((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), "/") + target
	if authenticate {
		c.ui.Printf("The address holds a one-time token: it signs a browser in once, within ten minutes.\n")
	}
	if showURL {
		c.ui.Printf("URL for web UI: %s\n", addr)
		return cli.ExitOK
	}
	open := c.ui.OpenURL
	if open == nil {
		open = openBrowser
	}
	if err := open(addr); err != nil {
		// No browser here (a server, a container): the address is the
		// answer.
		c.ui.Printf("URL for web UI: %s\n", addr)
		return cli.ExitOK
	}
	c.ui.Printf("Opening URL %q\n", addr)
	return cli.ExitOK
}

// uiJobPath is a job page's path; a child job's ID keeps its slashes as
// path separators, as the UI routes them.
func uiJobPath(ns, id string) string {
	segs := strings.Split(id, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return "/ui/jobs/" + url.PathEscape(ns) + "/" + strings.Join(segs, "/")
}

// errNoBrowser reports that this machine has no way to open a browser.
var errNoBrowser = errors.New("no browser available")

// openBrowser starts the desktop's URL opener, where there is a desktop.
func openBrowser(addr string) error {
	var name string
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name = "explorer"
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errNoBrowser
		}
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return errNoBrowser
	}
	// The opener hands the address to the browser and exits.
	return exec.Command(path, addr).Run()
}
