package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/basepb"
)

// Every plugin kind shares the base plugin protocol (sdk/proto/base.proto):
// after the handshake of every launch, before any kind's Init, the host
// asks the plugin for its config schema, decodes the stanza's config block
// against it and hands the plugin the result. A config the agent or the
// plugin refuses fails the launch, with each problem at its file:line:col.

// ErrConfigRefused means a plugin's config block was refused: it does not
// decode against the schema the plugin publishes, or the plugin refused the
// decoded value, or the plugin takes no configuration at all. It is of the
// kind structs.ErrInvalid (the config must change; a retry will not help).
var ErrConfigRefused = structs.NewError(structs.ErrInvalid, "plugin config refused")

// ConfigError is a refused plugin config: one line per problem, each
// `<file:line:col>: plugin "<name>": config <path>: <message>` (the
// position left out where the field has none, as for a plugin_dir file no
// stanza names). It wraps ErrConfigRefused.
type ConfigError struct {
	Plugin   string
	Problems []string
}

func (e *ConfigError) Error() string { return strings.Join(e.Problems, "\n") }

// Unwrap exposes the kind.
func (e *ConfigError) Unwrap() error { return ErrConfigRefused }

// Bounds on what a plugin's answers may make the host report or wait for.
const (
	// configCallTimeout bounds each Base call; a plugin answers both in
	// well under a millisecond, as they only describe and store a value.
	configCallTimeout = 10 * time.Second
	// maxConfigProblems is how many refused fields one error lists.
	maxConfigProblems = 20
	// maxProblemBytes bounds a plugin's message and path in an error.
	maxProblemBytes = 512
)

// pluginConfig is what configure learned and delivered at one launch.
type pluginConfig struct {
	// spec is the schema the instance published; nil: it takes no config.
	spec *basepb.Spec
	// served: the instance serves the Base service. One that does not is
	// handed nothing.
	served bool
	// json is the decoded config in force in the instance, canonical
	// (cty's JSON: object keys sorted), so reloads compare it bytewise.
	json []byte
}

// configure gives a freshly launched instance its config: the body of the
// stanza's config block (nil: none) decoded against the schema the
// instance publishes. A refusal, by the agent or the plugin, is a
// *ConfigError; a plugin that answers neither in time nor sensibly fails
// the launch with a plain error.
func configure(ctx context.Context, conn grpc.ClientConnInterface, name string, body hcl.Body) (pluginConfig, error) {
	client := base.NewClient(conn)
	sctx, cancel := context.WithTimeout(ctx, configCallTimeout)
	spec, err := client.ConfigSchema(sctx)
	cancel()
	served := true
	switch {
	case errors.Is(err, base.ErrNoConfig):
		served = false // a plugin without the Base service takes no config
	case err != nil:
		return pluginConfig{}, fmt.Errorf("base: ConfigSchema: %w", err)
	}
	if err := base.CheckSpec(spec); err != nil {
		return pluginConfig{}, fmt.Errorf("base: the plugin publishes a config schema the agent cannot use: %w", err)
	}
	raw, diags := base.Decode(spec, body)
	if diags.HasErrors() {
		if spec == nil {
			return pluginConfig{}, &ConfigError{Plugin: name, Problems: []string{
				fmt.Sprintf("%splugin %q takes no configuration; remove its config block", at(firstSubject(diags, body)), name)}}
		}
		return pluginConfig{}, decodeError(name, diags)
	}
	out := pluginConfig{spec: spec, served: served, json: raw}
	if !served {
		return out, nil
	}
	cctx, cancel := context.WithTimeout(ctx, configCallTimeout)
	defer cancel()
	fes, err := client.SetConfig(cctx, raw, name)
	if err != nil {
		return pluginConfig{}, fmt.Errorf("base: SetConfig: %w", err)
	}
	if len(fes) > 0 {
		return pluginConfig{}, fieldErrors(name, spec, body, fes)
	}
	return out, nil
}

// decodeError reports the diagnostics of decoding a config block, each at
// its position and naming the plugin.
func decodeError(name string, diags hcl.Diagnostics) error {
	e := &ConfigError{Plugin: name}
	for _, d := range diags.Errs() {
		if len(e.Problems) == maxConfigProblems {
			e.Problems = append(e.Problems, fmt.Sprintf("plugin %q: config: %d more problems", name, len(diags.Errs())-maxConfigProblems))
			break
		}
		var r hcl.Range
		var msg string
		if dg, ok := d.(*hcl.Diagnostic); ok {
			if dg.Subject != nil {
				r = *dg.Subject
			}
			msg = dg.Summary
			if dg.Detail != "" {
				msg += "; " + dg.Detail
			}
		} else {
			msg = d.Error()
		}
		e.Problems = append(e.Problems, fmt.Sprintf("%splugin %q: config: %s", at(r), name, msg))
	}
	return e
}

// fieldErrors reports the fields a plugin refused, each at the position of
// the field in body (or of the deepest part of its path there is, or of
// the config block for a field left at its default).
func fieldErrors(name string, spec *basepb.Spec, body hcl.Body, fes []*basepb.FieldError) error {
	var def hcl.Range
	if body != nil {
		def = body.MissingItemRange()
	}
	e := &ConfigError{Plugin: name}
	for i, fe := range fes {
		if i == maxConfigProblems {
			e.Problems = append(e.Problems, fmt.Sprintf("plugin %q: config: %d more problems", name, len(fes)-i))
			break
		}
		path, msg := clip(fe.GetPath()), clip(fe.GetMessage())
		if msg == "" {
			msg = "refused by the plugin"
		}
		r := def
		if path != "" {
			r = base.FieldRange(spec, body, path, def)
			path = " " + path
		}
		e.Problems = append(e.Problems, fmt.Sprintf("%splugin %q: config%s: %s", at(r), name, path, msg))
	}
	return e
}

// firstSubject is the position of the first diagnostic that has one, else
// of body.
func firstSubject(diags hcl.Diagnostics, body hcl.Body) hcl.Range {
	for _, d := range diags {
		if d.Subject != nil {
			return *d.Subject
		}
	}
	if body != nil {
		return body.MissingItemRange()
	}
	return hcl.Range{}
}

// at is r as an error prefix, "file:line:col: ", or "" when r is no
// position in a file.
func at(r hcl.Range) string {
	if r.Filename == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d: ", r.Filename, r.Start.Line, r.Start.Column)
}

// clip bounds a string a plugin sent, so a plugin cannot flood the
// agent's errors and logs.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= maxProblemBytes {
		return s
	}
	cut := maxProblemBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// configChange says whether body, decoded against the schema of the
// running instance, differs from the config in force in it: "" when it
// does not, else why the plugin needs a reload. A body that does not
// decode counts as changed: the reload's launch reports why it is refused.
func (c pluginConfig) configChange(body hcl.Body) string {
	raw, diags := base.Decode(c.spec, body)
	switch {
	case diags.HasErrors():
		return "config changed (and does not decode: " + firstLine(diags.Error()) + ")"
	case !bytes.Equal(raw, c.json):
		return "config changed"
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return clip(s)
}

// isConfigRefusal reports whether a launch failed because its config was
// refused.
func isConfigRefusal(err error) bool { return errors.Is(err, ErrConfigRefused) }
