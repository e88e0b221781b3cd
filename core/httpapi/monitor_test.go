package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/internal/testwait"
)

// monitorAPI serves the API over httptest with an intercept logger as the
// agent's; the server is closed when the test ends (after the test's own
// cleanups, which end its streams).
func monitorAPI(t *testing.T) (*httptest.Server, hclog.InterceptLogger) {
	t.Helper()
	logger := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "agent", Level: hclog.Info, Output: io.Discard})
	api, _ := newTestAPI(t, Config{LogSinks: logger})
	api.logHeartbeat = 20 * time.Millisecond // so a stopped client sees its stop soon
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return ts, logger
}

// The official client's Agent().Monitor receives the agent's log lines at
// the level asked and above, framed; a bad level is a 400 naming the
// field; an agent without a logger to monitor answers 501.
func TestAgentMonitorNomadClient(t *testing.T) {
	ts, logger := monitorAPI(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL, HttpClient: &http.Client{Transport: transport}})
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	frames, errs := c.Agent().Monitor(stop, &nomadapi.QueryOptions{Params: map[string]string{"log_level": "warn"}})
	t.Cleanup(func() { close(stop) })
	var got strings.Builder
	n := 0
	testwait.For(t, 30*time.Second, "a warn line in the monitor", func() bool {
		n++
		logger.Named("probe").Info("info line must not show", "n", n)
		logger.Named("probe").Warn("warn line", "n", n)
		select {
		case f := <-frames:
			if f != nil {
				got.Write(f.Data)
			}
		case err := <-errs:
			t.Fatalf("monitor: %v", err)
		default:
		}
		return strings.Contains(got.String(), "warn line")
	})
	if !strings.Contains(got.String(), "[WARN]  agent.probe: warn line") {
		t.Errorf("monitor frame %q lacks the formatted warn line", got.String())
	}
	if strings.Contains(got.String(), "info line") {
		t.Errorf("a warn monitor showed an info line: %q", got.String())
	}

	_, bad := c.Agent().Monitor(nil, &nomadapi.QueryOptions{Params: map[string]string{"log_level": "loud"}})
	if err := <-bad; err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "log_level") {
		t.Errorf("log_level=loud: %v; want a 400 naming log_level", err)
	}

	none, _ := newTestAPI(t, Config{})
	if rec := do(t, none.Handler(), "GET", "/v1/agent/monitor", ""); rec.Code != http.StatusNotImplemented {
		t.Errorf("monitor without a logger: %d, want 501", rec.Code)
	}
}

// openMonitor opens a monitor stream with query q and returns its lines,
// read by one goroutine that ends when the stream is closed at the end of
// the test.
func openMonitor(t *testing.T, ts *httptest.Server, q string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/agent/monitor?"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("monitor: %d", resp.StatusCode)
	}
	lines := make(chan string)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return lines
}

// readUntil takes lines until one contains want, calling log every poll
// while it waits (the sink registers after the answer starts), and
// returns it; it fails the test after 30 s.
func readUntil(t *testing.T, lines <-chan string, want string, log func()) string {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(testwait.Poll)
	defer poll.Stop()
	log()
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, want) {
				return l
			}
		case <-poll.C:
			log()
		case <-deadline.C:
			t.Fatalf("timed out after 30s waiting for a line with %q", want)
		}
	}
}

// Plain and JSON-formatted lines: plain=true answers the lines themselves,
// log_json=true each as a JSON object.
func TestAgentMonitorPlainJSON(t *testing.T) {
	ts, logger := monitorAPI(t)
	body := openMonitor(t, ts, "plain=true&log_level=debug&log_json=true")
	line := readUntil(t, body, "json probe", func() { logger.Debug("json probe", "k", "v") })
	var obj map[string]any
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		t.Fatalf("line %q is not JSON: %v", line, err)
	}
	if obj["@message"] != "json probe" || obj["@level"] != "debug" || obj["k"] != "v" {
		t.Errorf("JSON line %v; want message, level debug and k=v", obj)
	}
}

// A reader that stops reading never holds the agent's logger: the agent
// logs on (its lines beyond the monitor's buffer are dropped), and the
// stream then says how many lines it dropped.
func TestAgentMonitorSlowReader(t *testing.T) {
	ts, logger := monitorAPI(t)
	body := openMonitor(t, ts, "plain=true&log_level=info")
	readUntil(t, body, "first", func() { logger.Info("first") })

	// The reader reads nothing while the agent writes far more than the
	// buffer and the connection hold.
	const lines = 20 * monitorBuffer
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		// Far more than loopback TCP buffers hold, whatever their size.
		pad := strings.Repeat("x", 2000)
		for i := range lines {
			logger.Info("flood", "i", i, "pad", pad)
		}
	}()
	testwait.For(t, 60*time.Second, "the agent to log while the monitor's reader reads nothing", func() bool {
		select {
		case <-logged:
			return true
		default:
			return false
		}
	})
	line := readUntil(t, body, "dropped", func() {})
	if !strings.Contains(line, "[WARN]  monitor: dropped") {
		t.Errorf("drop report %q", line)
	}
}
