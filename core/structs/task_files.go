package structs

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// TaskArtifact is a task's artifact block: a file, archive or repository
// fetched (go-getter URL syntax) into the task's directory before it
// starts.
type TaskArtifact struct {
	GetterSource  string            `codec:",omitempty"`
	GetterOptions map[string]string `codec:",omitempty"`
	GetterHeaders map[string]string `codec:",omitempty"`
	// GetterMode is "any" (by the URL), "file" or "dir".
	GetterMode string `codec:",omitempty" bound:"id"`
	// RelativeDest is relative to the task's directory ("local/" by
	// default).
	RelativeDest string `codec:",omitempty"`
	// GetterInsecure (skip TLS verification) and Chown (give the files to
	// the task's user) are Nomad's; drover's client does neither, so a job
	// setting them is refused.
	GetterInsecure bool `codec:",omitempty"`
	Chown          bool `codec:",omitempty"`
}

// Template is a task's template block, rendered into the task's directory
// before it starts.
type Template struct {
	SourcePath   string `codec:",omitempty"`
	DestPath     string `codec:",omitempty"`
	EmbeddedTmpl string `codec:",omitempty" bound:"bytes=MaxTemplateBytes"`
	// ChangeMode is "restart", "signal", "script" or "noop": what a
	// re-render does to the task.
	ChangeMode   string        `codec:",omitempty" bound:"id"`
	ChangeSignal string        `codec:",omitempty" bound:"id"`
	Splay        time.Duration `codec:",omitempty"`
	// Perms is the octal mode of the rendered file ("0644").
	Perms      string `codec:",omitempty" bound:"id"`
	Uid        *int   `codec:",omitempty"`
	Gid        *int   `codec:",omitempty"`
	LeftDelim  string `codec:",omitempty" bound:"id"`
	RightDelim string `codec:",omitempty" bound:"id"`
	// Envvars: the rendered file is KEY=value lines added to the task's
	// environment.
	Envvars       bool          `codec:",omitempty"`
	ErrMissingKey bool          `codec:",omitempty"`
	Wait          *TemplateWait `codec:",omitempty"`
	// Once (render once, never re-render) is Nomad's; drover's client
	// re-renders on every change, so a job setting it is refused.
	Once bool `codec:",omitempty"`
	// ChangeScript is the script change_mode = "script" runs, parsed as
	// Nomad parses it; drover runs no change scripts, so a job with one
	// is refused at registration.
	ChangeScript *ChangeScript `codec:",omitempty"`
}

// ChangeScript is a template's change_script block.
type ChangeScript struct {
	Command     string        `codec:",omitempty" hcl:"command"`
	Args        []string      `codec:",omitempty" hcl:"args"`
	Timeout     time.Duration `codec:",omitempty" hcl:"timeout"`
	FailOnError bool          `codec:",omitempty" hcl:"fail_on_error"`
}

// TemplateWait is a template's wait block: how long a re-render waits for
// its data to settle.
type TemplateWait struct {
	Min *time.Duration `codec:",omitempty"`
	Max *time.Duration `codec:",omitempty"`
}

// Template change modes.
const (
	TemplateChangeModeRestart = "restart"
	TemplateChangeModeSignal  = "signal"
	TemplateChangeModeScript  = "script"
	TemplateChangeModeNoop    = "noop"
)

// Artifact getter modes.
const (
	GetterModeAny  = "any"
	GetterModeFile = "file"
	GetterModeDir  = "dir"
)

// Bounds of a task's files.
const (
	MaxArtifactsPerTask = 32
	MaxTemplatesPerTask = 32
	// MaxTemplateBytes bounds one embedded template.
	MaxTemplateBytes = 256 << 10
)

// Canonicalize fills Nomad's defaults of an artifact block.
func (a *TaskArtifact) Canonicalize() {
	if a.GetterMode == "" {
		a.GetterMode = GetterModeAny
	}
	if a.RelativeDest == "" {
		a.RelativeDest = "local/"
	}
}

// Canonicalize fills Nomad's defaults of a template block.
func (t *Template) Canonicalize() {
	if t.ChangeMode == "" {
		t.ChangeMode = TemplateChangeModeRestart
	}
	if t.ChangeMode == TemplateChangeModeSignal && t.ChangeSignal != "" {
		t.ChangeSignal = strings.ToUpper(t.ChangeSignal)
	}
	if t.Splay == 0 {
		t.Splay = 5 * time.Second
	}
	if t.Perms == "" {
		t.Perms = "0644"
	}
	if t.LeftDelim == "" {
		t.LeftDelim = "{{"
	}
	if t.RightDelim == "" {
		t.RightDelim = "}}"
	}
}

// insideAllocDir reports whether p, relative to a task's directory, stays
// inside the allocation's directory (the task directory's parent), as
// Nomad allows (e.g. "../alloc/config.json").
func insideAllocDir(p string) bool {
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "/") {
		return false
	}
	clean := path.Clean("task/" + filepath.ToSlash(p))
	return clean != ".." && !strings.HasPrefix(clean, "../") && clean != "."
}

func (t *Task) validateFiles(l *errList, where string) {
	for i, a := range t.Artifacts {
		w := fmt.Sprintf("%s: artifact %d", where, i+1)
		if a == nil {
			l.add("%s: empty", w)
			continue
		}
		if a.GetterSource == "" {
			l.add("%s: source is required", w)
		} else if !strings.Contains(a.GetterSource, "${") {
			// An interpolated source is checked by the client once known.
			if err := CheckArtifactSource(a.GetterSource); err != nil {
				l.add("%s: source: %v", w, err)
			}
		}
		switch a.GetterMode {
		case "", GetterModeAny, GetterModeFile, GetterModeDir:
		default:
			l.add("%s: mode is %q, must be %q, %q or %q", w, a.GetterMode, GetterModeAny, GetterModeFile, GetterModeDir)
		}
		if a.RelativeDest != "" && !insideAllocDir(a.RelativeDest) {
			l.add("%s: destination %q escapes the allocation directory (it is relative to the task directory)", w, a.RelativeDest)
		}
		if a.GetterInsecure {
			l.add("%s: insecure: not supported: drover's client always verifies the TLS certificate of an artifact's server", w)
		}
		if a.Chown {
			l.add("%s: chown: not supported: drover's client does not change the owner of downloaded artifacts", w)
		}
	}
	dests := map[string]int{}
	for i, tm := range t.Templates {
		w := fmt.Sprintf("%s: template %d", where, i+1)
		if tm == nil {
			l.add("%s: empty", w)
			continue
		}
		if tm.Once {
			l.add("%s: once: not supported: drover's client re-renders a template whenever its data changes", w)
		}
		switch {
		case tm.SourcePath == "" && tm.EmbeddedTmpl == "":
			l.add("%s: data or source is required", w)
		case tm.SourcePath != "" && tm.EmbeddedTmpl != "":
			l.add("%s: set data or source, not both", w)
		}
		if tm.SourcePath != "" && !insideAllocDir(tm.SourcePath) {
			l.add("%s: source %q must be a path inside the allocation directory, relative to the task directory", w, tm.SourcePath)
		}
		switch {
		case tm.DestPath == "":
			l.add("%s: destination is required", w)
		case !insideAllocDir(tm.DestPath):
			l.add("%s: destination %q escapes the allocation directory (it is relative to the task directory)", w, tm.DestPath)
		default:
			d := path.Clean(filepath.ToSlash(tm.DestPath))
			if j, dup := dests[d]; dup {
				l.add("%s: destination %q is also template %d's", w, tm.DestPath, j)
			}
			dests[d] = i + 1
		}
		switch tm.ChangeMode {
		case "", TemplateChangeModeRestart, TemplateChangeModeNoop:
		case TemplateChangeModeSignal:
			if tm.ChangeSignal == "" {
				l.add("%s: change_signal is required with change_mode %q", w, tm.ChangeMode)
			}
		case TemplateChangeModeScript:
			l.add("%s: change_mode %q is not supported (drover runs no change scripts); use restart, signal or noop", w, tm.ChangeMode)
		default:
			l.add("%s: change_mode is %q, must be one of restart, signal, noop", w, tm.ChangeMode)
		}
		if tm.ChangeScript != nil {
			l.add("%s: change_script: not supported: drover runs no template change scripts; use change_mode \"restart\", \"signal\" or \"noop\"", w)
		}
		if tm.Splay < 0 {
			l.add("%s: splay must not be negative", w)
		}
		if tm.Perms != "" {
			if _, err := parseFileMode(tm.Perms); err != nil {
				l.add("%s: perms %q: %v", w, tm.Perms, err)
			}
		}
		if tm.LeftDelim == "" != (tm.RightDelim == "") {
			l.add("%s: set both left_delimiter and right_delimiter, or neither", w)
		}
	}
}

// parseFileMode parses an octal file mode such as "0644".
func parseFileMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("must be an octal file mode such as \"0644\"")
	}
	if m > 0o7777 {
		return 0, fmt.Errorf("must be at most 07777")
	}
	return uint32(m), nil
}

// FileMode is the template's perms as a mode (0644 when unset or bad).
func (t *Template) FileMode() uint32 {
	if m, err := parseFileMode(t.Perms); err == nil && t.Perms != "" {
		return m
	}
	return 0o644
}
