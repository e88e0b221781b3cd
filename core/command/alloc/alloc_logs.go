package alloc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// Tail heuristics: -n asks for lines but the API counts bytes, so the
// command fetches a generous number of bytes per line and trims. With -f,
// the backlog is taken as ended once the stream is idle for tailSettle.
const (
	defaultTailLines = 10
	bytesPerLine     = 256
	tailSettle       = 250 * time.Millisecond
)

// AllocLogsCommand is `drover alloc logs`.
type AllocLogsCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocLogsCommand) Synopsis() string { return "Stream the logs of a task" }

const allocLogsHelp = `
Usage: drover alloc logs [options] <allocation> [task]

  Prints the stdout (or stderr) log of a task of the allocation. The task
  may be omitted when the allocation's group has a single task.

Logs Options:

  -stderr
    Print the stderr log instead of stdout.

  -f
    Follow the log: keep printing as the task writes.

  -tail
    Print the end of the log (the last 10 lines unless -n or -c say).

  -n <lines>
    Print about the last <lines> lines. Implies -tail.

  -c <bytes>
    Print the last <bytes> bytes. Implies -tail.`

func (c *AllocLogsCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc logs", allocLogsHelp)
	var stderr, follow, tail bool
	var lines, numBytes int64
	fs.BoolVar(&stderr, "stderr", false, "")
	fs.BoolVar(&follow, "f", false, "")
	fs.BoolVar(&tail, "tail", false, "")
	fs.Int64Var(&lines, "n", -1, "")
	fs.Int64Var(&numBytes, "c", -1, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return c.UsageError(fs, "This command takes one or two arguments: <allocation> [task]")
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
	var alloc structs.Allocation
	if _, err := client.Get(ctx, "/v1/allocation/"+id, nil, &alloc); err != nil {
		return c.ui.Errorf("Error querying allocation: %s", err)
	}
	task, err := pickTask(&alloc, fs.Arg(1))
	if err != nil {
		return c.ui.Errorf("%s", err)
	}

	q := url.Values{"task": {task}, "type": {"stdout"}, "origin": {"start"}, "offset": {"0"}}
	if stderr {
		q.Set("type", "stderr")
	}
	lineLimit := int64(-1)
	if tail {
		q.Set("origin", "end")
		switch {
		case numBytes >= 0:
			q.Set("offset", strconv.FormatInt(numBytes, 10))
		default:
			q.Set("offset", strconv.FormatInt(lines*bytesPerLine, 10))
			lineLimit = lines
		}
	}
	if follow {
		q.Set("follow", "true")
	} else {
		q.Set("plain", "true")
	}

	var body io.ReadCloser
	open := func() (err error) {
		body, err = client.Stream(ctx, "/v1/client/fs/logs/"+id, q)
		return err
	}
	// A follower waits out a moment without a leader before the stream
	// opens; once it streams, nothing more is retried (resuming would
	// repeat or skip output).
	if follow {
		err = cli.NewRetrier().Do(ctx, open)
	} else {
		err = open()
	}
	if err != nil {
		return c.ui.Errorf("Error reading file: %s", err)
	}
	defer body.Close()
	if err := writeStream(ctx, c.ui.Out, body, follow, lineLimit); err != nil {
		return c.ui.Errorf("Error reading file: %s", err)
	}
	return cli.ExitOK
}

// writeStream copies a file stream's body to out: a plain body whole, or
// its last lineLimit lines (lineLimit >= 0), and a followed one frame by
// frame. An error after ctx ended, or the followed stream's end, is none.
func writeStream(ctx context.Context, out io.Writer, body io.Reader, follow bool, lineLimit int64) error {
	var err error
	switch {
	case !follow && lineLimit >= 0:
		var data []byte
		if data, err = io.ReadAll(body); err == nil || ctx.Err() != nil {
			_, _ = out.Write(lastLines(data, int(lineLimit)))
		}
	case !follow:
		_, err = io.Copy(out, body)
	default:
		if err = copyFrames(ctx, out, body, int(lineLimit)); errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// pickTask returns the named task, or the group's only task.
func pickTask(a *structs.Allocation, name string) (string, error) {
	var tasks []string
	if a.Job != nil {
		if tg := a.Job.LookupTaskGroup(a.TaskGroup); tg != nil {
			for _, t := range tg.Tasks {
				tasks = append(tasks, t.Name)
			}
		}
	}
	if len(tasks) == 0 {
		tasks = cli.SortedKeys(a.TaskStates)
	}
	if name != "" {
		for _, t := range tasks {
			if t == name {
				return name, nil
			}
		}
		return "", fmt.Errorf("Could not find task named: %s", name)
	}
	switch len(tasks) {
	case 0:
		return "", errors.New("Allocation has no tasks")
	case 1:
		return tasks[0], nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Allocation %q is running the following tasks:\n", cli.LimitID(a.ID, false))
	for _, t := range tasks {
		fmt.Fprintf(&b, "  * %s\n", t)
	}
	b.WriteString("\nPlease specify the task.")
	return "", errors.New(b.String())
}

// lastLines returns the last n lines of data (a final line without a
// newline counts).
func lastLines(data []byte, n int) []byte {
	if n <= 0 {
		return nil
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	start := end
	for seen := 0; start > 0; start-- {
		if data[start-1] == '\n' {
			seen++
			if seen == n {
				break
			}
		}
	}
	return data[start:]
}

// logFrame is one object of the framed log stream.
type logFrame struct {
	Offset    int64
	Data      []byte
	File      string
	FileEvent string
}

// copyFrames writes the data of a framed log stream to out. With
// lineLimit >= 0 the backlog (what arrives before the stream first goes
// idle) is cut to its last lineLimit lines.
func copyFrames(ctx context.Context, out io.Writer, body io.Reader, lineLimit int) error {
	// The reader goroutine ends once it cannot hand over a frame (ctx
	// cancelled here) or the caller closes body.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	frames := make(chan []byte)
	errc := make(chan error, 1)
	go func() {
		defer close(frames)
		dec := json.NewDecoder(body)
		for {
			var f logFrame
			if err := dec.Decode(&f); err != nil {
				if !errors.Is(err, io.EOF) {
					errc <- err
				}
				return
			}
			if len(f.Data) == 0 {
				continue // heartbeat
			}
			select {
			case frames <- f.Data:
			case <-ctx.Done():
				return
			}
		}
	}()

	var backlog []byte
	buffering := lineLimit >= 0
	settle := time.NewTimer(tailSettle)
	defer settle.Stop()
	flushBacklog := func() error {
		buffering = false
		_, err := out.Write(lastLines(backlog, lineLimit))
		backlog = nil
		return err
	}
	for {
		select {
		case data, ok := <-frames:
			if !ok {
				if buffering {
					if err := flushBacklog(); err != nil {
						return err
					}
				}
				select {
				case err := <-errc:
					return err
				default:
					return nil
				}
			}
			if buffering {
				backlog = append(backlog, data...)
				settle.Reset(tailSettle)
				continue
			}
			if _, err := out.Write(data); err != nil {
				return err
			}
		case <-settle.C:
			if buffering {
				if err := flushBacklog(); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
