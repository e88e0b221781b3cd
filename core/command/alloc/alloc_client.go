package alloc

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// clientCommands are the commands of the client-side API: alloc fs,
// restart, signal and checks.
func clientCommands(ui *cli.UI) map[string]cli.Command {
	return map[string]cli.Command{
		"alloc fs":      &AllocFSCommand{ui: ui},
		"alloc restart": &AllocRestartCommand{ui: ui},
		"alloc signal":  &AllocSignalCommand{ui: ui},
		"alloc checks":  &AllocChecksCommand{ui: ui},
		"alloc exec":    &AllocExecCommand{ui: ui},
	}
}

// AllocRestartCommand is `drover alloc restart`.
type AllocRestartCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocRestartCommand) Synopsis() string { return "Restart a running allocation or task" }

const allocRestartHelp = `
Usage: drover alloc restart [options] <allocation> [task]

  Restarts a task of the allocation in place, or every running task when
  none is named. The restart does not count against the restart policy.

Restart Options:

  -task <name>
    The task to restart (the same as the second argument).

  -all-tasks
    Restart every running task of the allocation.`

func (c *AllocRestartCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc restart", allocRestartHelp)
	var task string
	var all bool
	fs.StringVar(&task, "task", "", "")
	fs.BoolVar(&all, "all-tasks", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return c.UsageError(fs, "This command takes one or two arguments: <allocation> [task]")
	}
	if fs.NArg() == 2 {
		if task != "" && task != fs.Arg(1) {
			return c.UsageError(fs, "The -task flag and the task argument name different tasks")
		}
		task = fs.Arg(1)
	}
	if all && task != "" {
		return c.UsageError(fs, "The -all-tasks flag cannot be used with a task name")
	}
	client := c.Client()
	ctx := context.Background()
	id, err := cli.ResolveAllocID(ctx, client, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("allocation", err))
	}
	req := clientapi.AllocRestartRequest{TaskName: task, AllTasks: all}
	if err := client.Write(ctx, http.MethodPut, "/v1/client/allocation/"+id+"/restart", nil, req, nil); err != nil {
		return c.ui.Errorf("Failed to restart allocation:\n\n%s", err)
	}
	return cli.ExitOK
}

// AllocSignalCommand is `drover alloc signal`.
type AllocSignalCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocSignalCommand) Synopsis() string { return "Signal a running allocation" }

const allocSignalHelp = `
Usage: drover alloc signal [options] <allocation> [task]

  Sends a signal to a task of the allocation, or to every running task
  when none is named.

Signal Options:

  -s <signal>
    The signal to send (default SIGKILL).

  -task <name>
    The task to signal (the same as the second argument).`

func (c *AllocSignalCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc signal", allocSignalHelp)
	var sig, task string
	fs.StringVar(&sig, "s", "", "")
	fs.StringVar(&task, "task", "", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return c.UsageError(fs, "This command takes one or two arguments: <allocation> [task]")
	}
	if fs.NArg() == 2 {
		if task != "" && task != fs.Arg(1) {
			return c.UsageError(fs, "The -task flag and the task argument name different tasks")
		}
		task = fs.Arg(1)
	}
	client := c.Client()
	ctx := context.Background()
	id, err := cli.ResolveAllocID(ctx, client, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("allocation", err))
	}
	req := clientapi.AllocSignalRequest{Task: task, Signal: sig}
	if err := client.Write(ctx, http.MethodPut, "/v1/client/allocation/"+id+"/signal", nil, req, nil); err != nil {
		return c.ui.Errorf("Error signalling allocation: %s", err)
	}
	return cli.ExitOK
}

// AllocChecksCommand is `drover alloc checks`.
type AllocChecksCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocChecksCommand) Synopsis() string {
	return "Outputs service health check status information"
}

const allocChecksHelp = `
Usage: drover alloc checks [options] <allocation>

  Prints the latest status of each check of the allocation's nomad-provider
  services.

Checks Options:

  -json
    Print the checks as JSON.`

func (c *AllocChecksCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc checks", allocChecksHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
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
	var checks map[string]*structs.CheckStatus
	if _, err := client.Get(ctx, "/v1/client/allocation/"+id+"/checks", nil, &checks); err != nil {
		return c.ui.Errorf("Error querying allocation checks: %s", err)
	}
	if asJSON {
		c.ui.Printf("%s\n", cli.ToJSON(checks))
		return cli.ExitOK
	}
	if len(checks) == 0 {
		c.ui.Printf("No checks for allocation %q\n", cli.LimitID(id, false))
		return cli.ExitOK
	}
	list := make([]*structs.CheckStatus, 0, len(checks))
	for _, ch := range checks {
		list = append(list, ch)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Service != list[j].Service {
			return list[i].Service < list[j].Service
		}
		return list[i].Check < list[j].Check
	})
	c.ui.Printf("Status of %d Nomad Service Checks\n", len(list))
	for _, ch := range list {
		c.ui.Printf("\n%s\n", cli.FormatKV([]string{
			"ID|" + ch.ID, "Name|" + ch.Check, "Group|" + ch.Group, "Task|" + cli.OrNone(ch.Task),
			"Service|" + ch.Service, "Status|" + ch.Status, "StatusCode|" + strconv.Itoa(ch.StatusCode),
			"Mode|" + ch.Mode, "Timestamp|" + time.Unix(ch.Timestamp, 0).Format(time.RFC3339),
			"Output|" + strings.TrimSpace(ch.Output),
		}))
	}
	return cli.ExitOK
}

// AllocFSCommand is `drover alloc fs`.
type AllocFSCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocFSCommand) Synopsis() string { return "Inspect the contents of an allocation directory" }

const allocFSHelp = `
Usage: drover alloc fs [options] <allocation> [path]

  Lists a directory of the allocation's directory, or prints a file. The
  path is relative to the allocation directory ("/" by default), which
  holds alloc/ (shared by the group's tasks) and a directory per task.

FS Options:

  -stat
    Describe the file instead of printing it.

  -f
    Follow the file: keep printing what is appended (with -tail, from
    its end).

  -tail
    Print the end of the file (the last 10 lines unless -n or -c say).

  -n <lines>
    Print about the last <lines> lines. Implies -tail.

  -c <bytes>
    Print the last <bytes> bytes. Implies -tail.

  -H
    Show sizes in human-readable units.

  -json
    Print listings and -stat as JSON.`

func (c *AllocFSCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc fs", allocFSHelp)
	var stat, follow, tail, human, asJSON bool
	var lines, numBytes int64
	fs.BoolVar(&stat, "stat", false, "")
	fs.BoolVar(&follow, "f", false, "")
	fs.BoolVar(&tail, "tail", false, "")
	fs.BoolVar(&human, "H", false, "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.Int64Var(&lines, "n", -1, "")
	fs.Int64Var(&numBytes, "c", -1, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return c.UsageError(fs, "This command takes one or two arguments: <allocation> [path]")
	}
	path := "/"
	if fs.NArg() == 2 {
		path = fs.Arg(1)
	}
	if lines >= 0 || numBytes >= 0 {
		tail = true
	}
	if tail && lines < 0 && numBytes < 0 {
		lines = defaultTailLines
	}
	client := c.Client()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	id, err := cli.ResolveAllocID(ctx, client, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("allocation", err))
	}
	q := url.Values{"path": {path}}
	var info clientapi.FileInfo
	if _, err := client.Get(ctx, "/v1/client/fs/stat/"+id, q, &info); err != nil {
		return c.ui.Errorf("Error stating file: %s", err)
	}
	size := func(n int64) string {
		if human {
			return humanSize(n)
		}
		return strconv.FormatInt(n, 10)
	}
	if stat {
		if asJSON {
			c.ui.Printf("%s\n", cli.ToJSON(info))
			return cli.ExitOK
		}
		c.ui.Printf("%s\n", cli.FormatList([]string{"Mode|Size|Modified Time|Content Type|Name",
			fmt.Sprintf("%s|%s|%s|%s|%s", info.FileMode, size(info.Size), cli.FormatTime(info.ModTime), info.ContentType, info.Name)}))
		return cli.ExitOK
	}
	if info.IsDir {
		var files []*clientapi.FileInfo
		if _, err := client.Get(ctx, "/v1/client/fs/ls/"+id, q, &files); err != nil {
			return c.ui.Errorf("Error listing directory: %s", err)
		}
		if asJSON {
			c.ui.Printf("%s\n", cli.ToJSON(files))
			return cli.ExitOK
		}
		rows := []string{"Mode|Size|Modified Time|Name"}
		for _, f := range files {
			name := f.Name
			if f.IsDir {
				name += "/"
			}
			rows = append(rows, fmt.Sprintf("%s|%s|%s|%s", f.FileMode, size(f.Size), cli.FormatTime(f.ModTime), name))
		}
		c.ui.Printf("%s\n", cli.FormatList(rows))
		return cli.ExitOK
	}

	// A file: printed whole, its tail, or followed.
	offset, origin, lineLimit := int64(0), "start", int64(-1)
	if tail {
		origin = "end"
		if numBytes >= 0 {
			offset = numBytes
		} else {
			offset, lineLimit = lines*bytesPerLine, lines
		}
	}
	sq := url.Values{"path": {path}, "origin": {origin}, "offset": {strconv.FormatInt(offset, 10)}, "follow": {strconv.FormatBool(follow)}}
	if !follow {
		sq.Set("plain", "true")
	}
	body, err := client.Stream(ctx, "/v1/client/fs/stream/"+id, sq)
	if err != nil {
		return c.ui.Errorf("Error reading file: %s", err)
	}
	defer body.Close()
	if err := writeStream(ctx, c.ui.Out, body, follow, lineLimit); err != nil {
		return c.ui.Errorf("Error reading file: %s", err)
	}
	return cli.ExitOK
}

// humanSize renders bytes with binary units.
func humanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(max(n, 0))
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
