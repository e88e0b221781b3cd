package command

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

// recordingCommand is an extra command as cmd/drover registers them.
type recordingCommand struct{ args []string }

func (c *recordingCommand) Run(args []string) int { c.args = args; return 3 }
func (c *recordingCommand) Synopsis() string      { return "Run a drover agent" }

func TestRunDispatch(t *testing.T) {
	agent := &recordingCommand{}
	extra := map[string]cli.Command{"agent": agent}
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
		wantOut string
	}{
		{name: "no args lists commands", args: nil, code: 1, wantErr: "Available commands:"},
		{name: "help", args: []string{"-help"}, code: 0, wantErr: "job run"},
		{name: "extra command listed", args: []string{"help"}, code: 0, wantErr: "Run a drover agent"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 1, wantErr: `Unknown command "frobnicate"`},
		{name: "group lists subcommands", args: []string{"job"}, code: 0, wantErr: "periodic force"},
		{name: "unknown subcommand", args: []string{"job", "explode"}, code: 1, wantErr: "Usage: drover job"},
		{name: "version", args: []string{"version"}, code: 0, wantOut: "drover v" + Version},
		{name: "-version", args: []string{"-version"}, code: 0, wantOut: "drover v"},
		{name: "unknown flag", args: []string{"job", "status", "-bogus"}, code: 1, wantErr: "Usage: drover job status"},
		{name: "command help", args: []string{"alloc", "logs", "-h"}, code: 0, wantErr: "-stderr"},
		{name: "too many args", args: []string{"job", "run", "a", "b"}, code: 1, wantErr: "This command takes one argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := clitest.RunCLI(t, nil, "", extra, tc.args...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut)
		})
	}

	r := clitest.RunCLI(t, nil, "", extra, "agent", "-dev", "-bind", "127.0.0.1")
	if r.Code != 3 || strings.Join(agent.args, " ") != "-dev -bind 127.0.0.1" {
		t.Errorf("extra command: exit %d args %v", r.Code, agent.args)
	}
}

func TestClientSettings(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []any{})
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantToken string
		wantNS    string
	}{
		{name: "DROVER_ADDR and NOMAD_TOKEN", env: map[string]string{"DROVER_ADDR": f.Srv.URL, "NOMAD_TOKEN": "nt"}, wantToken: "nt"},
		{name: "NOMAD_ADDR", env: map[string]string{"NOMAD_ADDR": f.Srv.URL}},
		{name: "DROVER_TOKEN wins", env: map[string]string{"NOMAD_ADDR": f.Srv.URL, "DROVER_TOKEN": "dt", "NOMAD_TOKEN": "nt"}, wantToken: "dt"},
		{name: "flags win", env: map[string]string{"DROVER_ADDR": "http://127.0.0.1:1", "DROVER_TOKEN": "dt"},
			args: []string{"-address", strings.TrimPrefix(f.Srv.URL, "http://"), "-token", "ft", "-namespace", "prod"}, wantToken: "ft", wantNS: "namespace=prod"},
		{name: "namespace from env", env: map[string]string{"DROVER_ADDR": f.Srv.URL, "NOMAD_NAMESPACE": "dev"}, wantNS: "namespace=dev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := clitest.RunCLI(t, tc.env, "", nil, append([]string{"job", "status"}, tc.args...)...)
			clitest.WantCode(t, r, 0)
			req := f.Request("GET /v1/jobs")
			if req.Token != tc.wantToken || req.Query != tc.wantNS {
				t.Errorf("token %q query %q, want %q %q", req.Token, req.Query, tc.wantToken, tc.wantNS)
			}
		})
	}

	t.Run("default address", func(t *testing.T) {
		m := &cli.Meta{UI: &cli.UI{Getenv: func(string) string { return "" }}}
		if c := m.Client(); c.Address != cli.DefaultAddress {
			t.Errorf("address %q", c.Address)
		}
	})
	t.Run("API errors carry status and body", func(t *testing.T) {
		f.Fail("GET /v1/job/web", 500, "rpc error: boom")
		r := f.Run(t, "", "job", "inspect", "web")
		clitest.WantCode(t, r, 1)
		clitest.WantContains(t, "stderr", r.ErrOut, "No job(s) with prefix or id \"web\" found")
		f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web"}})
		r = f.Run(t, "", "job", "inspect", "web")
		clitest.WantCode(t, r, 1)
		clitest.WantContains(t, "stderr", r.ErrOut, "Unexpected response code: 500 (rpc error: boom)")
	})
}

func TestFormatList(t *testing.T) {
	got := cli.FormatList([]string{"ID|Status|Name", "abc|running|x", "abcdef|ok|longer name"})
	want := "ID      Status   Name\nabc     running  x\nabcdef  ok       longer name"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	kv := cli.FormatKV([]string{"ID|x", "Submit Date|y"})
	if kv != "ID          = x\nSubmit Date = y" {
		t.Errorf("kv\n%s", kv)
	}
}

func TestShortDurationAndSizes(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {7 * time.Second, "7s"}, {65 * time.Second, "1m5s"}, {time.Hour + 5*time.Minute + 9*time.Second, "1h5m"},
		{3*24*time.Hour + 2*time.Hour, "3d2h"}, {2 * time.Hour, "2h"},
	}
	for _, tc := range tests {
		if got := cli.ShortDuration(tc.d); got != tc.want {
			t.Errorf("shortDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := cli.PrettyTimeDiff(clitest.TestNow.Add(-90*time.Second), clitest.TestNow); got != "1m30s ago" {
		t.Errorf("prettyTimeDiff = %q", got)
	}
	if got := cli.PrettyTimeDiff(clitest.TestNow.Add(time.Hour), clitest.TestNow); got != "1h from now" {
		t.Errorf("prettyTimeDiff future = %q", got)
	}
	for mb, want := range map[int64]string{300: "300 MiB", 7884: "7.7 GiB", 0: "0 B", 40960: "40 GiB"} {
		if got := cli.HumanMiB(mb); got != want {
			t.Errorf("humanMiB(%d) = %q, want %q", mb, got, want)
		}
	}
}

func TestFormatAllocMetrics(t *testing.T) {
	failed := map[string]*structs.AllocMetric{
		"g": {
			NodesEvaluated: 3, NodesFiltered: 3,
			ConstraintFiltered: map[string]int{"${attr.kernel.name} = plan9": 3},
			NodesAvailable:     map[string]int{"dc1": 3, "dc2": 0},
		},
		"h": {NodesEvaluated: 2, NodesExhausted: 2, DimensionExhausted: map[string]int{"memory": 2}, CoalescedFailures: 4},
	}
	got := cli.FormatFailedTGAllocs(failed, "")
	want := `Task Group "g" (failed to place 1 allocation):
  * No nodes are available in datacenter "dc2"
  * Constraint "${attr.kernel.name} = plan9": 3 nodes excluded by filter

Task Group "h" (failed to place 5 allocations):
  * Resources exhausted on 2 nodes
  * Dimension "memory" exhausted on 2 nodes`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
