package main

import (
	"testing"

	"github.com/drover-org/drover/sdk/shared"
)

func TestServedBuiltin(t *testing.T) {
	fromHost := map[string]string{shared.Handshake.MagicCookieKey: shared.Handshake.MagicCookieValue}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" : none served
	}{
		{"serve command", []string{"__plugin", "scheduler-system"}, nil, "scheduler-system"},
		{"unknown built-in", []string{"__plugin", "nope"}, nil, ""},
		{"user typing plugin status", []string{"plugin", "status"}, nil, ""},
		{"user typing a built-in's name", []string{"plugin", "driver-rawexec"}, nil, ""},
		{"previous agent's command line", []string{"plugin", "driver-rawexec"}, fromHost, "driver-rawexec"},
		{"raw_exec shim of a previous agent", []string{"plugin", "driver-rawexec"}, map[string]string{"DROVER_RAWEXEC_SHIM": "1"}, "driver-rawexec"},
		{"agent", []string{"agent", "-dev"}, fromHost, ""},
		{"too short", []string{"__plugin"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := servedBuiltin(tc.args, func(k string) string { return tc.env[k] })
			if got := map[bool]string{true: p.Name}[ok]; got != tc.want {
				t.Errorf("served %q (ok %v), want %q", p.Name, ok, tc.want)
			}
		})
	}
}
