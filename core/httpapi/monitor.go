package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/httpapi/logstream"
)

// LogSinks is the side of the agent's logger that /v1/agent/monitor
// attaches to: an hclog.InterceptLogger, whose sinks see every line its
// named sub-loggers write, at every level.
type LogSinks interface {
	RegisterSink(sink hclog.SinkAdapter)
	DeregisterSink(sink hclog.SinkAdapter)
}

// Monitor limits. A monitor's lines wait in a buffer of monitorBuffer
// lines between the agent's logger and the HTTP connection: a reader too
// slow to keep up loses lines (counted and reported in the stream)
// instead of slowing the agent, whose logger never waits on a reader.
const (
	monitorBuffer = 512
	// monitorDropReport is how often a monitor reports the lines it
	// dropped since its last report.
	monitorDropReport = time.Second
)

// monitorLines is one monitor's buffer: the sink writes each formatted
// line into it without blocking.
type monitorLines struct {
	ch      chan []byte
	dropped atomic.Int64
}

// Write takes one formatted line (hclog writes a line in one call).
func (m *monitorLines) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	select {
	case m.ch <- line:
	default:
		m.dropped.Add(1)
	}
	return len(p), nil
}

// agentMonitor is GET /v1/agent/monitor: this agent's log lines from now
// on, at log_level (default info) and above, as plain text (plain=true) or
// Nomad's framed JSON stream; log_json formats each line as JSON.
func (s agentHandlers) agentMonitor(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	levelName := q.Get("log_level")
	if levelName == "" {
		levelName = "info"
	}
	if len(levelName) > 16 {
		s.writeError(w, badRequest("log_level: %d bytes is longer than 16", len(levelName)))
		return
	}
	level := hclog.LevelFromString(levelName)
	if level == hclog.NoLevel || level == hclog.Off {
		s.writeError(w, badRequest("log_level: unknown log level %q (trace, debug, info, warn, error)", levelName))
		return
	}
	plain, err := parseBool(r, "plain")
	if err != nil {
		s.writeError(w, err)
		return
	}
	logJSON, err := parseBool(r, "log_json")
	if err != nil {
		s.writeError(w, err)
		return
	}
	// Nomad forwards to another agent named by node_id or server_id;
	// drover streams only the agent asked.
	if s.refuseOtherAgent(w, r, "streams the logs of only the agent asked") {
		return
	}
	if s.logSinks == nil {
		writeText(w, http.StatusNotImplemented, "this agent's logger cannot be monitored")
		return
	}

	lines := &monitorLines{ch: make(chan []byte, monitorBuffer)}
	sink := hclog.NewSinkAdapter(&hclog.LoggerOptions{Level: level, JSONFormat: logJSON, Output: lines})
	s.logSinks.RegisterSink(sink)
	defer s.logSinks.DeregisterSink(sink)

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	lw := logstream.NewWriter(w, plain, "", 0)
	lw.Start() // the caller's client waits for the status before it reads
	_ = http.NewResponseController(w).Flush()
	var hb sync.WaitGroup
	if !plain {
		hb.Add(1)
		go func() {
			defer hb.Done()
			lw.Heartbeat(ctx, logHandlers(s).heartbeatEvery())
		}()
	}
	defer hb.Wait()
	defer cancel()

	report := time.NewTicker(monitorDropReport)
	defer report.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case line := <-lines.ch:
			if _, err := lw.Write(line); err != nil {
				return
			}
		case <-report.C:
			if n := lines.dropped.Swap(0); n > 0 {
				msg := fmt.Sprintf("%s [WARN]  monitor: dropped %d log lines: the reader is too slow\n", time.Now().UTC().Format(time.RFC3339), n)
				if _, err := lw.Write([]byte(msg)); err != nil {
					return
				}
			}
		}
	}
}

// isThisAgent reports whether a monitor's or profile's node_id or
// server_id names this agent: its client's node ID, its name, or
// "leader" on the leader.
func (s agentHandlers) isThisAgent(_ context.Context, key, v string) bool {
	self, _ := s.selfBody()["stats"].(map[string]any)
	switch key {
	case "node_id":
		if c, ok := self["client"].(map[string]string); ok && c["node_id"] == v {
			return true
		}
	case "server_id":
		if v == "leader" {
			if c, ok := s.srv.(Cluster); ok {
				return c.IsLeader()
			}
			return s.srv != nil
		}
		member, _ := s.selfBody()["member"].(map[string]any)
		if name, _ := member["Name"].(string); name != "" && name == v {
			return true
		}
	}
	return strings.EqualFold(v, s.nodeName) && v != ""
}
