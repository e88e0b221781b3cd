package operator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"

	"github.com/drover-org/drover/core/command/cli"
)

// OperatorEventsCommand is `drover operator events`: the event stream of
// the agent's server (GET /v1/event/stream), one event per line.
type OperatorEventsCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorEventsCommand) Synopsis() string {
	return "Stream cluster events (jobs, allocations, evaluations, nodes, ...)"
}

const operatorEventsHelp = `
Usage: drover operator events [options]

  Streams the events of the server the CLI talks to (-address), as
  /v1/event/stream serves them, until interrupted. Each event is printed on
  its own line as JSON ({"Topic","Type","Key","Namespace","FilterKeys",
  "Index","Payload"}), so that the output feeds jq or a log pipeline;
  heartbeats are not printed.

  Without -topic every topic is streamed, which needs a management token.

Events Options:

  -topic=<Topic[:Key]>
    A topic to stream, optionally only one key (a job ID for Job,
    Allocation and Evaluation events, a node ID for Node events). Repeat
    for more topics; "*" is every topic or every key. Topics: Job,
    Allocation, Evaluation, Node, Deployment, CSIVolume, CSIPlugin,
    ACLToken, ACLPolicy, Namespace.

  -index=<n>
    Start at this Raft index, if the server still holds it (the stream
    then starts at the oldest event it holds). Default 0: everything the
    server holds, then new events.

  Use -namespace=* for events of every namespace.`

func (c *OperatorEventsCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator events", operatorEventsHelp)
	var topics cli.StringsFlag
	var index uint64
	fs.Var(&topics, "topic", "")
	fs.Uint64Var(&index, "index", 0, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	q := url.Values{}
	for _, t := range topics {
		q.Add("topic", t)
	}
	q.Set("index", strconv.FormatUint(index, 10))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	body, err := c.Client().Stream(ctx, "/v1/event/stream", q)
	if err != nil {
		return c.ui.Errorf("Error opening the event stream: %s", err)
	}
	defer body.Close()
	if err := printEvents(body, c.ui.Out); err != nil && ctx.Err() == nil {
		return c.ui.Errorf("Event stream ended: %s", err)
	}
	return cli.ExitOK
}

// printEvents copies the stream's events to w, one per line, until the
// stream ends; an error line from the server ends it with that error.
func printEvents(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || bytes.Equal(line, []byte("{}")) {
			continue
		}
		var batch struct {
			Events []json.RawMessage
			Error  string
		}
		if err := json.Unmarshal(line, &batch); err != nil {
			return err
		}
		if batch.Error != "" {
			return errors.New(batch.Error)
		}
		for _, e := range batch.Events {
			if _, err := w.Write(append(append([]byte{}, e...), '\n')); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
