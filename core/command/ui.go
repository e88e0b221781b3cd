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
)

// UICommand is `drover ui [-authenticate] [-show-url]`.
type UICommand struct {
	meta
	ui *UI
}

func (c *UICommand) Synopsis() string { return "Open the web UI" }

const uiHelp = `
Usage: drover ui [options]

  Opens the agent's web UI in a browser, or prints its address where no
  browser can be started.

UI Options:

  -authenticate
    Creates a one-time token from the current ACL token and adds it to the
    address, so that the browser logs in as the caller without the secret
    ever appearing in the address. The one-time token expires after ten
    minutes and can be exchanged once.

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
	c.meta.ui = c.ui
	fs := c.flagSet("ui", uiHelp)
	var authenticate, showURL bool
	fs.BoolVar(&authenticate, "authenticate", false, "")
	fs.BoolVar(&showURL, "show-url", false, "")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return c.usageError(fs, "This command takes no arguments")
	}
	client := c.client()
	u, err := url.Parse(client.Address)
	if err != nil {
		return c.ui.errorf("Error parsing the agent address %q: %s", client.Address, err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/ui/"
	q := url.Values{}
	if client.Namespace != "" && client.Namespace != "default" {
		q.Set("namespace", client.Namespace)
	}
	if authenticate {
		if client.Token == "" {
			return c.ui.errorf("Error: -authenticate needs an ACL token (-token, DROVER_TOKEN or NOMAD_TOKEN)")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var resp oneTimeTokenResponse
		if err := client.Write(ctx, "PUT", "/v1/acl/token/onetime", nil, nil, &resp); err != nil {
			return c.ui.errorf("Error creating a one-time token: %s", err)
		}
		if resp.OneTimeToken == nil || resp.OneTimeToken.OneTimeSecretID == "" {
			return c.ui.errorf("Error creating a one-time token: the agent answered without one")
		}
		q.Set("ott", resp.OneTimeToken.OneTimeSecretID)
	}
	u.RawQuery = q.Encode()
	addr := u.String()
	if showURL {
		c.ui.printf("URL for web UI: %s\n", addr)
		return exitOK
	}
	open := c.ui.OpenURL
	if open == nil {
		open = openBrowser
	}
	if err := open(addr); err != nil {
		// No browser here (a server, a container): the address is the
		// answer.
		c.ui.printf("URL for web UI: %s\n", addr)
		return exitOK
	}
	c.ui.printf("Opening URL %q\n", addr)
	return exitOK
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
