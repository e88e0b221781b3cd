package operator

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// The agent's own plugins: schedulers, task drivers. `drover plugin …` is
// Nomad's name for CSI plugins, so these live under operator.

// OperatorPluginListCommand is `drover operator plugin list`.
type OperatorPluginListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorPluginListCommand) Synopsis() string {
	return "List the agent's plugins (schedulers, task drivers)"
}

const operatorPluginListHelp = `
Usage: drover operator plugin list [options]

  Lists the plugins of the agent the CLI talks to (-address): built-in and
  third-party schedulers and task drivers, with their version, the job types
  a scheduler serves, the process id, the restart count and the health.

List Options:

  -json
    Print the API's JSON instead.`

func (c *OperatorPluginListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator plugin list", operatorPluginListHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	const path = "/v1/agent/plugins"
	if asJSON {
		return c.PrintJSON(ctx, client, path, "plugins")
	}
	var resp struct{ Plugins []structs.AgentPlugin }
	if _, err := client.Get(ctx, path, nil, &resp); err != nil {
		return c.ui.Errorf("Error querying plugins: %s", err)
	}
	c.ui.Printf("%s\n", formatPluginList(resp.Plugins))
	return cli.ExitOK
}

func formatPluginList(plugins []structs.AgentPlugin) string {
	if len(plugins) == 0 {
		return "No plugins"
	}
	rows := []string{"Name|Kind|Version|Job Types|PID|Restarts|Health"}
	for _, p := range plugins {
		pid := "-"
		if p.PID != 0 {
			pid = strconv.Itoa(p.PID)
		}
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s", p.Name, p.Kind, cli.OrNone(p.Version),
			cli.OrNone(strings.Join(jobTypeNames(p.JobTypes), ",")), pid, p.Restarts, p.Health))
	}
	return cli.FormatList(rows)
}

func jobTypeNames(jts []structs.AgentJobType) []string {
	out := make([]string, 0, len(jts))
	for _, jt := range jts {
		out = append(out, jt.Name)
	}
	return out
}

// OperatorPluginStatusCommand is `drover operator plugin status <name>`.
type OperatorPluginStatusCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorPluginStatusCommand) Synopsis() string {
	return "Show one of the agent's plugins in detail"
}

const operatorPluginStatusHelp = `
Usage: drover operator plugin status [options] <name>

  Shows one plugin of the agent: its binary, version, process, restarts,
  health and last error, and for a scheduler what it declares about each job
  type it serves.

Status Options:

  -json
    Print the API's JSON instead.`

func (c *OperatorPluginStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator plugin status", operatorPluginStatusHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	name, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	path := "/v1/agent/plugins/" + cli.EscapeID(name)
	if asJSON {
		return c.PrintJSON(ctx, client, path, "plugin "+strconv.Quote(name))
	}
	var p structs.AgentPlugin
	if _, err := client.Get(ctx, path, nil, &p); err != nil {
		return c.ui.Errorf("Error querying plugin %q: %s", name, err)
	}
	c.ui.Printf("%s\n", formatPluginStatus(p))
	return cli.ExitOK
}

func formatPluginStatus(p structs.AgentPlugin) string {
	path := p.Path
	if p.Builtin {
		path = "(built into the drover binary)"
	}
	pid, started := "-", "-"
	if p.PID != 0 {
		pid = strconv.Itoa(p.PID)
	}
	if !p.StartTime.IsZero() {
		started = cli.FormatTime(p.StartTime)
	}
	var b strings.Builder
	b.WriteString(cli.FormatKV([]string{
		"Name|" + p.Name,
		"Kind|" + p.Kind,
		"Builtin|" + strconv.FormatBool(p.Builtin),
		"Path|" + path,
		"Version|" + cli.OrNone(p.Version),
		"PID|" + pid,
		"Started|" + started,
		"Restarts|" + strconv.Itoa(p.Restarts),
		"Health|" + p.Health + describeHealth(p.HealthDescription),
		"Last Error|" + cli.OrNone(p.LastError),
	}))
	for _, jt := range p.JobTypes {
		fmt.Fprintf(&b, "\n\nJob Type %q\n", jt.Name)
		for _, line := range describeBehavior(jt.Behavior) {
			b.WriteString("  " + line + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// describeBehavior says in words what a scheduler declares about a job
// type, one fact a line.
func describeBehavior(bh structs.JobTypeBehavior) []string {
	yes := func(on bool, ifOn, ifOff string) string {
		if on {
			return ifOn
		}
		return ifOff
	}
	var out []string
	out = append(out,
		yes(bh.PerNode, "Places each group's count on every eligible node", "Places each group's count across the cluster"),
		yes(bh.RunsToCompletion, "Tasks run to completion: an exit 0 is done, the job is dead once every allocation is",
			"Tasks keep running: an exit is restarted by the restart policy"),
	)
	if bh.RunningUntilStopped {
		out = append(out, "The job counts as running from registration until it is stopped")
	}
	out = append(out, fmt.Sprintf("Scheduling attempts per evaluation: %d", bh.MaxAttempts))
	if r := bh.DefaultRestart; r != nil {
		out = append(out, fmt.Sprintf("Default restart policy: %d attempts in %s, %s apart, then %s",
			r.Attempts, r.Interval, r.Delay, cli.OrNone(r.Mode)))
	}
	if r := bh.DefaultReschedule; r != nil {
		attempts := fmt.Sprintf("%d attempts in %s", r.Attempts, r.Interval)
		if r.Unlimited {
			attempts = "unlimited attempts"
		}
		out = append(out, fmt.Sprintf("Default reschedule policy: %s, %s delay from %s up to %s",
			attempts, cli.OrNone(r.DelayFunction), r.Delay, r.MaxDelay))
	} else {
		out = append(out, "Default reschedule policy: none (failed allocations are not rescheduled)")
	}
	if m := bh.DefaultMigrate; m != nil {
		out = append(out, fmt.Sprintf("Default migrate block: max_parallel %d, health by %s, healthy after %s within %s",
			m.MaxParallel, cli.OrNone(m.HealthCheck), m.MinHealthyTime, m.HealthyDeadline))
	}
	var allowed, refused []string
	for _, f := range []struct {
		on   bool
		name string
	}{{bh.AllowPeriodic, "periodic"}, {bh.AllowParameterized, "parameterized"}, {bh.AllowMaxRunDuration, "max_run_duration"}} {
		if f.on {
			allowed = append(allowed, f.name)
		} else {
			refused = append(refused, f.name)
		}
	}
	refused = append(refused, bh.RefusedBlocks...)
	out = append(out, "Allows: "+cli.OrNone(strings.Join(allowed, ", ")), "Refuses: "+cli.OrNone(strings.Join(refused, ", ")))
	if bh.MaxGroupCount > 0 {
		out = append(out, fmt.Sprintf("A group's count is at most %d", bh.MaxGroupCount))
	}
	var evals []string
	if bh.EvalOnNodeJoin {
		evals = append(evals, "a node joins")
	}
	if bh.EvalOnNodeUpdate {
		evals = append(evals, "a node changes")
	}
	if bh.EvalOnAllocEnd {
		evals = append(evals, "an allocation ends")
	}
	if bh.EvalOnAllocRunning {
		evals = append(evals, "an allocation starts running")
	}
	out = append(out, "Re-evaluates jobs when: "+cli.OrNone(strings.Join(evals, ", ")))
	if bh.DrainLast {
		out = append(out, "Leaves a draining node last")
	}
	if bh.PreemptionSwitch != "" {
		out = append(out, "May preempt when the scheduler configuration's "+bh.PreemptionSwitch+" is on")
	} else {
		out = append(out, "Never preempts")
	}
	return out
}

// OperatorPluginReloadCommand is `drover operator plugin reload [<name>]`.
type OperatorPluginReloadCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorPluginReloadCommand) Synopsis() string {
	return "Reload the agent's plugins, or relaunch one from its binary"
}

const operatorPluginReloadHelp = `
Usage: drover operator plugin reload [options] [<name>]

  Without a name, reloads every plugin of the agent as SIGHUP does: the
  agent reads its configuration files and plugin_dir again, starts the
  plugins whose stanza or file is new, drains and stops those whose stanza
  and file are both gone (their job types wait, not fail, until a plugin
  declares them again), and relaunches those whose binary or stanza
  changed. It prints what it added, removed and relaunched.

  With a name, relaunches that one plugin from its binary on disk, so that
  a new build takes over. The new process serves calls as soon as it has
  started; calls in flight on the old one finish first. Other plugins are
  not touched.`

func (c *OperatorPluginReloadCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator plugin reload", operatorPluginReloadHelp)
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	switch fs.NArg() {
	case 0:
		return c.reloadAll()
	case 1:
		return c.reloadOne(fs.Arg(0))
	}
	return c.UsageError(fs, "This command takes at most one argument: <name>")
}

func (c *OperatorPluginReloadCommand) reloadOne(name string) int {
	var resp struct {
		Reloaded bool
		Plugin   *structs.AgentPlugin
	}
	q := url.Values{"name": {name}}
	if err := c.Client().Write(context.Background(), "PUT", "/v1/agent/plugins/reload", q, nil, &resp); err != nil {
		return c.ui.Errorf("Error reloading plugin %q: %s", name, err)
	}
	if resp.Plugin != nil && resp.Plugin.PID != 0 {
		c.ui.Printf("Plugin %q reloaded (pid %d, version %s)\n", name, resp.Plugin.PID, cli.OrNone(resp.Plugin.Version))
	} else {
		c.ui.Printf("Plugin %q reloaded\n", name)
	}
	return cli.ExitOK
}

func (c *OperatorPluginReloadCommand) reloadAll() int {
	var resp struct {
		Reloaded                   bool
		Added, Removed, Relaunched []string
	}
	if err := c.Client().Write(context.Background(), "PUT", "/v1/agent/plugins/reload", nil, nil, &resp); err != nil {
		return c.ui.Errorf("Error reloading plugins: %s", err)
	}
	c.ui.Printf("Plugins reloaded\n%s\n", cli.FormatKV([]string{
		"Added|" + cli.OrNone(strings.Join(resp.Added, ", ")),
		"Removed|" + cli.OrNone(strings.Join(resp.Removed, ", ")),
		"Relaunched|" + cli.OrNone(strings.Join(resp.Relaunched, ", ")),
	}))
	return cli.ExitOK
}

// describeHealth is the reason beside an unhealthy plugin's health.
func describeHealth(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}
