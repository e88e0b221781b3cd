package operator

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// `drover operator autopilot get-config|set-config|health`, over Nomad's
// /v1/operator/autopilot/* endpoints.

// OperatorAutopilotGetCommand is `drover operator autopilot get-config`.
type OperatorAutopilotGetCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorAutopilotGetCommand) Synopsis() string {
	return "Display the current Autopilot configuration"
}

const autopilotGetHelp = `
Usage: drover operator autopilot get-config [-json]

  Displays the autopilot configuration (operator:read).`

func (c *OperatorAutopilotGetCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator autopilot get-config", autopilotGetHelp)
	asJSON := fs.Bool("json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	var cfg structs.AutopilotConfig
	if _, err := c.Client().Get(context.Background(), "/v1/operator/autopilot/configuration", nil, &cfg); err != nil {
		return c.ui.Errorf("Error querying Autopilot configuration: %s", err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(&cfg, "", "    ")
		c.ui.Printf("%s\n", b)
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", cli.FormatKV([]string{
		"CleanupDeadServers|" + strconv.FormatBool(cfg.CleanupDeadServers),
		"LastContactThreshold|" + cfg.LastContactThreshold.String(),
		"MaxTrailingLogs|" + strconv.FormatUint(cfg.MaxTrailingLogs, 10),
		"MinQuorum|" + strconv.FormatUint(uint64(cfg.MinQuorum), 10),
		"ServerStabilizationTime|" + cfg.ServerStabilizationTime.String(),
		"EnableRedundancyZones|" + strconv.FormatBool(cfg.EnableRedundancyZones),
		"DisableUpgradeMigration|" + strconv.FormatBool(cfg.DisableUpgradeMigration),
		"EnableCustomUpgrades|" + strconv.FormatBool(cfg.EnableCustomUpgrades),
	}))
	return cli.ExitOK
}

// OperatorAutopilotSetCommand is `drover operator autopilot set-config`.
type OperatorAutopilotSetCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorAutopilotSetCommand) Synopsis() string {
	return "Modify the current Autopilot configuration"
}

const autopilotSetHelp = `
Usage: drover operator autopilot set-config [options]

  Changes the autopilot configuration: only the given options change it.
  The write is a check-and-set against the configuration read first, so a
  concurrent change is not overwritten (operator:write).

Set Config Options:

  -cleanup-dead-servers=[true|false]
    Remove a server gone longer than the stabilization time from the Raft
    configuration, when the cluster keeps its quorum without it.

  -last-contact-threshold=<duration>
    How long a follower may go without contact from the leader and still
    be healthy.

  -max-trailing-logs=<n>
    How many log entries a server may trail the leader by and still be
    healthy.

  -min-quorum=<n>
    The voter count cleanup never goes below.

  -server-stabilization-time=<duration>
    How long a server must be healthy to be stable, and how long a dead
    server is kept before its cleanup.

  -enable-redundancy-zones, -disable-upgrade-migration,
  -enable-custom-upgrades=[true|false]
    Stored and reported, as Nomad's open-source edition does.`

func (c *OperatorAutopilotSetCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator autopilot set-config", autopilotSetHelp)
	var (
		cleanup, zones, noMigration, customUpgrades optBool
		lastContact, stabilization                  optDuration
		trailing, quorum                            optUint
	)
	fs.Var(&cleanup, "cleanup-dead-servers", "")
	fs.Var(&zones, "enable-redundancy-zones", "")
	fs.Var(&noMigration, "disable-upgrade-migration", "")
	fs.Var(&customUpgrades, "enable-custom-upgrades", "")
	fs.Var(&lastContact, "last-contact-threshold", "")
	fs.Var(&stabilization, "server-stabilization-time", "")
	fs.Var(&trailing, "max-trailing-logs", "")
	fs.Var(&quorum, "min-quorum", "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	ctx := context.Background()
	client := c.Client()
	var cfg structs.AutopilotConfig
	if _, err := client.Get(ctx, "/v1/operator/autopilot/configuration", nil, &cfg); err != nil {
		return c.ui.Errorf("Error querying Autopilot configuration: %s", err)
	}
	cleanup.apply(&cfg.CleanupDeadServers)
	zones.apply(&cfg.EnableRedundancyZones)
	noMigration.apply(&cfg.DisableUpgradeMigration)
	customUpgrades.apply(&cfg.EnableCustomUpgrades)
	lastContact.apply(&cfg.LastContactThreshold)
	stabilization.apply(&cfg.ServerStabilizationTime)
	if trailing.set {
		cfg.MaxTrailingLogs = trailing.v
	}
	if quorum.set {
		cfg.MinQuorum = uint(quorum.v)
	}
	q := url.Values{"cas": {strconv.FormatUint(cfg.ModifyIndex, 10)}}
	var updated bool
	if err := client.Write(ctx, http.MethodPut, "/v1/operator/autopilot/configuration", q, &cfg, &updated); err != nil {
		return c.ui.Errorf("Error setting Autopilot configuration: %s", err)
	}
	if !updated {
		return c.ui.Errorf("Configuration could not be atomically updated, please try again")
	}
	c.ui.Printf("Configuration updated!\n")
	return cli.ExitOK
}

// OperatorAutopilotHealthCommand is `drover operator autopilot health`.
type OperatorAutopilotHealthCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorAutopilotHealthCommand) Synopsis() string {
	return "Display the current Autopilot health"
}

const autopilotHealthHelp = `
Usage: drover operator autopilot health [-json]

  Displays the health of every server as the leader's autopilot sees it,
  and how many servers the cluster can lose (operator:read). It exits 2
  when a server is unhealthy.`

func (c *OperatorAutopilotHealthCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator autopilot health", autopilotHealthHelp)
	asJSON := fs.Bool("json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	var h structs.OperatorHealthReply
	_, err := c.Client().Get(context.Background(), "/v1/operator/autopilot/health", nil, &h)
	var ae *cli.APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusTooManyRequests {
		// Unhealthy: the same body with a 429.
		err = json.Unmarshal([]byte(ae.Body), &h)
	}
	if err != nil {
		return c.ui.Errorf("Error querying Autopilot health: %s", err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(&h, "", "    ")
		c.ui.Printf("%s\n", b)
	} else {
		c.ui.Printf("%s\n\n", cli.FormatKV([]string{
			"Healthy|" + strconv.FormatBool(h.Healthy),
			"FailureTolerance|" + strconv.Itoa(h.FailureTolerance),
			"Leader|" + h.Leader,
		}))
		rows := []string{"ID|Name|Address|Status|Voter|Leader|Healthy|Last Contact|Last Term|Last Index|Stable Since"}
		for _, s := range h.Servers {
			rows = append(rows, s.ID+"|"+s.Name+"|"+s.Address+"|"+s.SerfStatus+"|"+strconv.FormatBool(s.Voter)+"|"+
				strconv.FormatBool(s.Leader)+"|"+strconv.FormatBool(s.Healthy)+"|"+s.LastContact.String()+"|"+
				strconv.FormatUint(s.LastTerm, 10)+"|"+strconv.FormatUint(s.LastIndex, 10)+"|"+s.StableSince.Format(time.RFC3339))
		}
		c.ui.Printf("%s\n", cli.FormatList(rows))
	}
	if !h.Healthy {
		return 2
	}
	return cli.ExitOK
}

// Optional flag values: each knows whether it was given.
type (
	optBool struct {
		v, set bool
	}
	optDuration struct {
		v   time.Duration
		set bool
	}
	optUint struct {
		v   uint64
		set bool
	}
)

var (
	_ flag.Value = (*optBool)(nil)
	_ flag.Value = (*optDuration)(nil)
	_ flag.Value = (*optUint)(nil)
)

func (b *optBool) String() string   { return strconv.FormatBool(b.v) }
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) Set(s string) (err error) {
	b.v, err = strconv.ParseBool(s)
	b.set = err == nil
	return err
}
func (b *optBool) apply(dst *bool) {
	if b.set {
		*dst = b.v
	}
}

func (d *optDuration) String() string { return d.v.String() }
func (d *optDuration) Set(s string) (err error) {
	d.v, err = time.ParseDuration(s)
	d.set = err == nil
	return err
}
func (d *optDuration) apply(dst *time.Duration) {
	if d.set {
		*dst = d.v
	}
}

func (u *optUint) String() string { return strconv.FormatUint(u.v, 10) }
func (u *optUint) Set(s string) (err error) {
	u.v, err = strconv.ParseUint(s, 10, 64)
	u.set = err == nil
	return err
}
