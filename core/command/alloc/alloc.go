package alloc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// AllocStatusCommand is `drover alloc status`.
type AllocStatusCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocStatusCommand) Synopsis() string { return "Display allocation status information" }

const allocStatusHelp = `
Usage: drover alloc status [options] <allocation>

  Shows an allocation (by ID or ID prefix): where it runs, its statuses,
  and for each task its state, resources and recent events.

Alloc Status Options:

  -json
    Print the API's JSON instead.

  -verbose
    Show full IDs and every task event.`

// recentEvents is how many task events alloc status shows without -verbose.
const recentEvents = 10

func (c *AllocStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc status", allocStatusHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.ParseOne(fs, args, "<allocation>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	id, err := cli.ResolveAllocID(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("allocation", err))
	}
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/allocation/"+id, "allocation")
	}
	var alloc structs.Allocation
	if _, err := client.Get(ctx, "/v1/allocation/"+id, nil, &alloc); err != nil {
		return c.ui.Errorf("Error querying allocation: %s", err)
	}
	c.ui.Printf("%s\n", formatAllocStatus(&alloc, verbose, c.Now()))
	return cli.ExitOK
}

func formatAllocStatus(a *structs.Allocation, verbose bool, now time.Time) string {
	version := "<none>"
	if a.Job != nil {
		version = fmt.Sprint(a.Job.Version)
	}
	sections := []string{cli.FormatKV([]string{
		"ID|" + cli.LimitID(a.ID, verbose),
		"Eval ID|" + cli.LimitID(a.EvalID, verbose),
		"Name|" + a.Name,
		"Node ID|" + cli.LimitID(a.NodeID, verbose),
		"Node Name|" + a.NodeName,
		"Job ID|" + a.JobID,
		"Job Version|" + version,
		"Client Status|" + a.ClientStatus,
		"Client Description|" + cli.OrNone(a.ClientDescription),
		"Desired Status|" + a.DesiredStatus,
		"Desired Description|" + cli.OrNone(a.DesiredDescription),
		"Created|" + cli.PrettyTimeDiff(time.Unix(0, a.CreateTime), now),
		"Modified|" + cli.PrettyTimeDiff(time.Unix(0, a.ModifyTime), now),
	})}
	if a.PreviousAllocation != "" || a.NextAllocation != "" {
		var rows []string
		if a.PreviousAllocation != "" {
			rows = append(rows, "Previous Allocation|"+cli.LimitID(a.PreviousAllocation, verbose))
		}
		if a.NextAllocation != "" {
			rows = append(rows, "Next Allocation|"+cli.LimitID(a.NextAllocation, verbose))
		}
		if r := rescheduleAttempts(a); r != "" {
			rows = append(rows, "Reschedule Attempts|"+r)
		}
		sections[0] += "\n" + cli.FormatKV(rows)
	}
	if addrs := allocAddresses(a); addrs != "" {
		sections = append(sections, "Allocation Addresses:\n"+addrs)
	}
	if len(a.TaskStates) == 0 {
		sections = append(sections, "No task states reported yet")
	}
	for _, name := range cli.SortedKeys(a.TaskStates) {
		sections = append(sections, formatTaskState(a, name, a.TaskStates[name], verbose))
	}
	return strings.Join(sections, "\n\n")
}

// allocAddresses lists the ports the alloc holds, as Nomad's alloc status
// does: label, whether the port was picked dynamically, and host address
// (with the port the task listens on when it differs). "" without ports.
func allocAddresses(a *structs.Allocation) string {
	if a.AllocatedResources == nil || len(a.AllocatedResources.Shared.Ports) == 0 {
		return ""
	}
	static := map[string]bool{}
	for _, n := range a.AllocatedResources.Shared.Networks {
		if n == nil {
			continue
		}
		for _, p := range n.ReservedPorts {
			static[p.Label] = true
		}
	}
	rows := []string{"Label|Dynamic|Address"}
	for _, p := range structs.SortedPorts(a.AllocatedResources.Shared.Ports) {
		addr := net.JoinHostPort(p.HostIP, strconv.Itoa(p.Value))
		if p.To > 0 && p.To != p.Value {
			addr += fmt.Sprintf(" -> %d", p.To)
		}
		dynamic := "yes"
		if static[p.Label] {
			dynamic = "no"
		}
		rows = append(rows, "*"+p.Label+"|"+dynamic+"|"+addr)
	}
	return cli.FormatList(rows)
}

// rescheduleAttempts is "<used>/<allowed>" for a rescheduled alloc whose
// group limits its reschedules, as Nomad's alloc status shows it; "" else.
func rescheduleAttempts(a *structs.Allocation) string {
	if a.RescheduleTracker == nil || len(a.RescheduleTracker.Events) == 0 || a.Job == nil {
		return ""
	}
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	if tg == nil || tg.ReschedulePolicy == nil || tg.ReschedulePolicy.Unlimited {
		return ""
	}
	return fmt.Sprintf("%d/%d", len(a.RescheduleTracker.Events), tg.ReschedulePolicy.Attempts)
}

// formatTaskState is one task's block of alloc status.
func formatTaskState(a *structs.Allocation, name string, ts *structs.TaskState, verbose bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task %q is %q\n", name, ts.State)

	if r := taskResources(a, name); r != "" {
		b.WriteString("Task Resources:\n" + r + "\n\n")
	}

	finished := "N/A"
	if !ts.FinishedAt.IsZero() {
		finished = cli.FormatTime(ts.FinishedAt)
	}
	lastRestart := "N/A"
	if !ts.LastRestart.IsZero() {
		lastRestart = cli.FormatTime(ts.LastRestart)
	}
	b.WriteString("Task Events:\n" + cli.FormatKV([]string{
		"Started At|" + cli.FormatTime(ts.StartedAt),
		"Finished At|" + finished,
		fmt.Sprintf("Total Restarts|%d", ts.Restarts),
		"Last Restart|" + lastRestart,
	}) + "\n\n")

	events := append([]*structs.TaskEvent(nil), ts.Events...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].Time > events[j].Time })
	if !verbose && len(events) > recentEvents {
		events = events[:recentEvents]
	}
	rows := []string{"Time|Type|Description"}
	for _, e := range events {
		rows = append(rows, fmt.Sprintf("%s|%s|%s", cli.FormatUnixNano(e.Time), e.Type, eventDescription(e)))
	}
	b.WriteString("Recent Events:\n" + cli.FormatList(rows))
	return b.String()
}

// eventDescription prefers the event's display message and falls back to
// its details.
func eventDescription(e *structs.TaskEvent) string {
	desc := e.DisplayMessage
	if desc == "" {
		desc = e.Message
	}
	if desc == "" {
		switch {
		case e.DriverError != "":
			desc = e.DriverError
		case e.SetupError != "":
			desc = e.SetupError
		case e.Type == structs.TaskTerminated:
			desc = fmt.Sprintf("Exit Code: %d", e.ExitCode)
			if e.Signal != 0 {
				desc += fmt.Sprintf(", Signal: %d", e.Signal)
			}
		}
	}
	// A description is one table cell: keep it on one line and away from
	// the column separator.
	desc = strings.ReplaceAll(desc, "\n", " ")
	return strings.ReplaceAll(desc, "|", "/")
}

// taskResources renders what was reserved for the task.
func taskResources(a *structs.Allocation, task string) string {
	var cpu, mem, disk int64
	switch {
	case a.AllocatedResources != nil && a.AllocatedResources.Tasks[task] != nil:
		t := a.AllocatedResources.Tasks[task]
		cpu, mem, disk = t.Cpu.CpuShares, t.Memory.MemoryMB, a.AllocatedResources.Shared.DiskMB
	case a.TaskResources[task] != nil:
		r := a.TaskResources[task]
		cpu, mem, disk = int64(r.CPU), int64(r.MemoryMB), int64(r.DiskMB)
	default:
		return ""
	}
	return cli.FormatList([]string{
		"CPU|Memory|Disk",
		fmt.Sprintf("%d MHz|%s|%s", cpu, cli.HumanMiB(mem), cli.HumanMiB(disk)),
	})
}

// AllocStopCommand is `drover alloc stop`.
type AllocStopCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocStopCommand) Synopsis() string { return "Stop and reschedule a running allocation" }

const allocStopHelp = `
Usage: drover alloc stop [options] <allocation>

  Stops the allocation and monitors the evaluation that the stop creates.

Alloc Stop Options:

  -detach
    Return right after the stop, printing the evaluation ID.

  -verbose
    Show full IDs.`

func (c *AllocStopCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc stop", allocStopHelp)
	var detach, verbose bool
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.ParseOne(fs, args, "<allocation>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	id, err := cli.ResolveAllocID(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("allocation", err))
	}
	var resp structs.AllocStopResponse
	if err := client.Write(ctx, http.MethodPut, "/v1/allocation/"+id+"/stop", nil, nil, &resp); err != nil {
		return c.ui.Errorf("Error stopping allocation: %s", err)
	}
	if detach || resp.EvalID == "" {
		c.ui.Printf("%s\n", resp.EvalID)
		return cli.ExitOK
	}
	return (&cli.Monitor{UI: c.ui, Client: client, Verbose: verbose}).Run(ctx, resp.EvalID)
}
