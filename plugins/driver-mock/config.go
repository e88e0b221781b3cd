package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drover-org/drover/sdk/driver"
)

// ConfigEnvVar carries the plugin config (the agent's `plugin
// "mock_driver" { config { … } }` stanza, as JSON, with the -dev agent's
// defaults filled in) to the plugin at launch.
const ConfigEnvVar = "DROVER_MOCK_PLUGIN_CONFIG"

// PluginConfig is the driver's configuration: Nomad's keys, and enabled,
// which the -dev agent sets (Nomad builds its mock driver only into
// development binaries; drover serves it where the operator asks).
type PluginConfig struct {
	Enabled bool `json:"enabled"`
	// FSIsolation is accepted for Nomad's configs; the mock driver has no
	// filesystem to isolate.
	FSIsolation string `json:"fs_isolation"`
	// ShutdownPeriodicAfter with ShutdownPeriodicDuration (seconds, or a
	// duration string) turns the driver undetected that long after it
	// starts, as Nomad's tests of fingerprint changes use it.
	ShutdownPeriodicAfter    bool            `json:"shutdown_periodic_after"`
	ShutdownPeriodicDuration json.RawMessage `json:"shutdown_periodic_duration"`

	shutdownAfter time.Duration
}

// ParsePluginConfig decodes the plugin config strictly. Empty input is
// the default: disabled.
func ParsePluginConfig(raw []byte) (*PluginConfig, error) {
	var cfg PluginConfig
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := decodeStrict(raw, &cfg); err != nil {
			return nil, fmt.Errorf("mock_driver plugin config: %w", err)
		}
	}
	switch cfg.FSIsolation {
	case "", "none", "chroot", "image":
	default:
		return nil, fmt.Errorf("mock_driver plugin config: fs_isolation %q must be one of none, chroot, image", cfg.FSIsolation)
	}
	if len(cfg.ShutdownPeriodicDuration) > 0 && string(cfg.ShutdownPeriodicDuration) != "null" {
		d, err := durationValue(cfg.ShutdownPeriodicDuration)
		if err != nil {
			return nil, fmt.Errorf("mock_driver plugin config: shutdown_periodic_duration: %w", err)
		}
		cfg.shutdownAfter = d
	}
	return &cfg, nil
}

// durationValue reads a number (Nomad's: nanoseconds, as its config
// decodes a time.Duration from a number) or a duration string ("5s").
func durationValue(raw json.RawMessage) (time.Duration, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 {
			return 0, errors.New("must not be negative")
		}
		return time.Duration(n), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, errors.New("must be a number of nanoseconds or a duration such as \"5s\"")
	}
	return parseDuration(s)
}

// Command is what a mock task does: Nomad's keys, at the top of the task
// config and in its exec_command block.
type Command struct {
	// RunFor is how long the task runs before it exits with ExitCode,
	// ExitSignal and ExitErrMsg ("" or "0s": it exits at once).
	RunFor     string `json:"run_for"`
	ExitCode   int32  `json:"exit_code"`
	ExitSignal int32  `json:"exit_signal"`
	ExitErrMsg string `json:"exit_err_msg"`
	// SignalError is the error SignalTask returns.
	SignalError string `json:"signal_error"`
	// StdoutString is written StdoutRepeat+1 times, StdoutRepeatDuration
	// apart, to the task's stdout; the stderr keys likewise.
	StdoutString         string `json:"stdout_string"`
	StdoutRepeat         int    `json:"stdout_repeat"`
	StdoutRepeatDuration string `json:"stdout_repeat_duration"`
	StderrString         string `json:"stderr_string"`
	StderrRepeat         int    `json:"stderr_repeat"`
	StderrRepeatDuration string `json:"stderr_repeat_duration"`
}

// TaskConfig is the jobspec task `config` block of a mock_driver task.
type TaskConfig struct {
	Command
	ExecCommand *Command `json:"exec_command"`
	// StartError makes StartTask fail with this message; unless
	// StartErrorRecoverable, the failure is the task config's (the task
	// is not restarted).
	StartError            string `json:"start_error"`
	StartErrorRecoverable bool   `json:"start_error_recoverable"`
	// StartBlockFor delays StartTask's answer.
	StartBlockFor string `json:"start_block_for"`
	// KillAfter delays a stopped task's exit.
	KillAfter string `json:"kill_after"`
	// PluginExitAfter ends the task with a "plugin shut down" error.
	PluginExitAfter string `json:"plugin_exit_after"`
	// The driver network Nomad's mock reports: drover's driver protocol
	// carries no driver network, so these are checked and logged only.
	DriverIP        string `json:"driver_ip"`
	DriverAdvertise bool   `json:"driver_advertise"`
	DriverPortMap   string `json:"driver_port_map"`
}

// maxRepeat bounds stdout_repeat and stderr_repeat.
const maxRepeat = 1 << 20

// plan is a parsed Command.
type plan struct {
	runFor      time.Duration
	exit        exitSpec
	signalError string
	stdout      output
	stderr      output
	killAfter   time.Duration
	pluginExit  time.Duration
	startBlock  time.Duration
	startError  string
	recoverable bool
	driverIP    string
	driverPorts string
	advertise   bool
}

type exitSpec struct {
	Code   int32  `json:"code"`
	Signal int32  `json:"signal"`
	Err    string `json:"err,omitempty"`
}

type output struct {
	s      string
	repeat int
	every  time.Duration
}

// parseTaskConfig decodes config_json strictly and checks every value, so
// a misspelt key or a bad duration fails StartTask naming the field.
func parseTaskConfig(raw []byte) (*plan, error) {
	var tc TaskConfig
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := decodeStrict(raw, &tc); err != nil {
			return nil, fmt.Errorf("%w: config: %v", driver.ErrInvalidConfig, err)
		}
	}
	p := &plan{startError: tc.StartError, recoverable: tc.StartErrorRecoverable,
		signalError: tc.SignalError, driverIP: tc.DriverIP, driverPorts: tc.DriverPortMap, advertise: tc.DriverAdvertise}
	var err error
	fields := []struct {
		name string
		s    string
		to   *time.Duration
	}{
		{"run_for", tc.RunFor, &p.runFor},
		{"stdout_repeat_duration", tc.StdoutRepeatDuration, &p.stdout.every},
		{"stderr_repeat_duration", tc.StderrRepeatDuration, &p.stderr.every},
		{"kill_after", tc.KillAfter, &p.killAfter},
		{"plugin_exit_after", tc.PluginExitAfter, &p.pluginExit},
		{"start_block_for", tc.StartBlockFor, &p.startBlock},
	}
	for _, f := range fields {
		if *f.to, err = parseDuration(f.s); err != nil {
			return nil, fmt.Errorf("%w: config: %s: %v", driver.ErrInvalidConfig, f.name, err)
		}
	}
	if tc.ExecCommand != nil {
		for name, s := range map[string]string{
			"exec_command.run_for":                tc.ExecCommand.RunFor,
			"exec_command.stdout_repeat_duration": tc.ExecCommand.StdoutRepeatDuration,
			"exec_command.stderr_repeat_duration": tc.ExecCommand.StderrRepeatDuration,
		} {
			if _, err := parseDuration(s); err != nil {
				return nil, fmt.Errorf("%w: config: %s: %v", driver.ErrInvalidConfig, name, err)
			}
		}
	}
	for name, n := range map[string]int{"stdout_repeat": tc.StdoutRepeat, "stderr_repeat": tc.StderrRepeat} {
		if n < 0 || n > maxRepeat {
			return nil, fmt.Errorf("%w: config: %s must be between 0 and %d, got %d", driver.ErrInvalidConfig, name, maxRepeat, n)
		}
	}
	if tc.ExitSignal < 0 || tc.ExitSignal > 64 {
		return nil, fmt.Errorf("%w: config: exit_signal must be a signal number between 0 and 64, got %d", driver.ErrInvalidConfig, tc.ExitSignal)
	}
	if tc.DriverPortMap != "" {
		label, port, ok := strings.Cut(tc.DriverPortMap, ":")
		var n int
		if _, err := fmt.Sscanf(port, "%d", &n); !ok || label == "" || err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: config: driver_port_map %q must be label:port", driver.ErrInvalidConfig, tc.DriverPortMap)
		}
	}
	p.exit = exitSpec{Code: tc.ExitCode, Signal: tc.ExitSignal, Err: tc.ExitErrMsg}
	p.stdout.s, p.stdout.repeat = tc.StdoutString, tc.StdoutRepeat
	p.stderr.s, p.stderr.repeat = tc.StderrString, tc.StderrRepeat
	return p, nil
}

// maxDuration bounds every duration of a task config: a mock task is a
// test's, and a typo of "1000h" should not park it for a month.
const maxDuration = 7 * 24 * time.Hour

// parseDuration reads a Go duration; "" is 0.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"10s\"", s)
	}
	if d < 0 || d > maxDuration {
		return 0, fmt.Errorf("%q must be between 0s and %s", s, maxDuration)
	}
	return d, nil
}

func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the config object")
	}
	return nil
}
