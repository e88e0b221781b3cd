// Package jobspec turns HCL2 job files written in Nomad's jobspec dialect
// into *structs.Job.
//
// The parser walks each body with a hand-written hcl.BodySchema instead of
// decoding into tagged structs: that way every refusal (a misspelt argument,
// a duration that does not parse, a second restart block) is reported at the
// token that caused it, which is what a user fixing a job file needs.
//
// Nomad resolves "${node.…}", "${attr.…}", "${meta.…}" and "${NOMAD_…}"
// on the client, after placement, so those references are kept verbatim in
// the parsed job; see runtime.go for how.
//
// The parser knows no job type by name: what depends on the type (the
// restart and reschedule defaults a group's blocks are laid over, whether
// a job-level update block reaches the groups) comes from the declaration
// of the scheduler plugin serving it, which the caller passes in Options.
package jobspec

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
)

// Error is returned for a job file that cannot be parsed. Diags carry the
// position of every problem; Error() renders one line per diagnostic as
// "file:line:col: Summary; Detail".
//
// errors.Is(err, structs.ErrInvalid) holds, so an HTTP handler maps a bad
// job file to 400 without knowing this type.
type Error struct {
	Diags hcl.Diagnostics
}

func (e *Error) Error() string {
	var lines []string
	for _, d := range e.Diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		lines = append(lines, formatDiag(d))
	}
	return strings.Join(lines, "\n")
}

// Unwrap reports the error's kind.
func (e *Error) Unwrap() error { return structs.ErrInvalid }

func formatDiag(d *hcl.Diagnostic) string {
	msg := d.Summary
	if d.Detail != "" {
		msg += "; " + d.Detail
	}
	if d.Subject == nil {
		return msg
	}
	s := d.Subject
	return fmt.Sprintf("%s:%d:%d: %s", s.Filename, s.Start.Line, s.Start.Column, msg)
}

// Options tell the parser what depends on the cluster it is parsing for.
// The zero value parses offline, knowing no job type.
type Options struct {
	// Defaults returns what the scheduler plugin serving jobType declares
	// about it (the declaration the server stamps into the registered job),
	// or nil when the caller does not know the type. The parser knows no job
	// type by name: with a declaration, a group's restart and reschedule
	// blocks are laid over its DefaultRestart and DefaultReschedule and the
	// job carries it as TypeBehavior, so Canonicalize and Validate apply the
	// type's defaults and rules as the server will; without one, a partial
	// block is laid over zero values and an absent one is left for the
	// server to fill. Nil knows no type.
	Defaults func(jobType string) *structs.JobTypeBehavior

	// Vars are "name=value" assignments of the file's input variables,
	// as `-var` gives them, applied in order after VarFiles. A value is a
	// string unless the variable's type is a collection or structural
	// type, in which case it is HCL syntax ("[1, 2]").
	Vars []string
	// VarFiles are var files, applied in order after Env. /v1/jobs/parse
	// passes its Variables as one.
	VarFiles []VarFile
	// Namespace is the namespace of a job whose file names none (the
	// CLI's -namespace, NOMAD_NAMESPACE); empty: the default namespace.
	Namespace string

	// Env is the environment ("NAME=value"); NOMAD_VAR_<name> entries set
	// variables, at the lowest precedence after defaults. Entries naming
	// no declared variable are ignored, as Nomad ignores them.
	Env []string
}

// behavior returns the declaration of jobType, a copy the job may own.
func (o Options) behavior(jobType string) *structs.JobTypeBehavior {
	if o.Defaults == nil {
		return nil
	}
	return o.Defaults(jobType).Copy()
}

// Parse parses one job file offline, knowing no job type (ParseWith with
// zero Options). filename is used only in positions.
func Parse(filename string, src []byte) (*structs.Job, error) {
	return ParseWith(filename, src, Options{})
}

// ParseWith parses one job file. filename is used only in positions. The
// returned job is canonicalized (defaults of NOMAD-BEHAVIOR §1.3 applied,
// those of its type from opts.Defaults) but not validated; see
// ParseAndValidateWith.
func ParseWith(filename string, src []byte, opts Options) (*structs.Job, error) {
	job, err := parse(filename, src, opts)
	if err != nil {
		return nil, err
	}
	job.Canonicalize()
	return job, nil
}

// parse returns the job as the file writes it, before Canonicalize.
func parse(filename string, src []byte, opts Options) (*structs.Job, error) {
	job, _, err := parseFile(filename, src, opts)
	return job, err
}

// parseFile is parse, also returning the parser (for the positions of
// the job's blocks) when the file parsed.
func parseFile(filename string, src []byte, opts Options) (*structs.Job, *parser, error) {
	if diags := hclguard.Check(filename, src); diags.HasErrors() {
		return nil, nil, &Error{Diags: diags}
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, nil, &Error{Diags: diags}
	}
	p := &parser{src: src, filename: filename, opts: opts, bodies: map[int]*hclsyntax.Body{}, blockAt: map[string]hcl.Range{}}
	body := file.Body.(*hclsyntax.Body)
	if p.checkCollections(body); p.diags.HasErrors() {
		return nil, nil, &Error{Diags: p.diags}
	}
	p.indexBodies(body)
	job := p.file(body)
	if p.diags.HasErrors() {
		p.redact(p.diags)
		sortDiags(p.diags)
		return nil, nil, &Error{Diags: p.diags}
	}
	if job.Namespace == "" {
		job.Namespace = opts.Namespace
	}
	return job, p, nil
}

// indexBodies fills p.bodies.
func (p *parser) indexBodies(body *hclsyntax.Body) {
	_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		if b, ok := n.(*hclsyntax.Body); ok {
			p.bodies[b.SrcRange.Start.Byte] = b
		}
		return nil
	})
}

// syntaxOf returns the source body behind b, which a dynamic block may
// have wrapped (a wrapped body reports the original's start as its
// MissingItemRange), or nil for a body not of this file.
func (p *parser) syntaxOf(b hcl.Body) *hclsyntax.Body {
	if sb, ok := b.(*hclsyntax.Body); ok {
		return sb
	}
	r := b.MissingItemRange()
	if r.Filename != p.filename {
		return nil
	}
	return p.bodies[r.Start.Byte]
}

// sortDiags orders diagnostics by position: HCL reports the unknown names of
// a body in map order, and a user reads a file top to bottom.
func sortDiags(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a != nil && b == nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
}

// ParseFile reads and parses the job file at path offline (ParseFileWith
// with zero Options).
func ParseFile(path string) (*structs.Job, error) {
	return ParseFileWith(path, Options{})
}

// ParseFileWith reads and parses the job file at path.
func ParseFileWith(path string, opts Options) (*structs.Job, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading job file: %w", err)
	}
	return ParseWith(path, src, opts)
}

// ParseAndValidate is ParseAndValidateWith with zero Options: the rules
// that depend on the job's type are left to the server.
func ParseAndValidate(filename string, src []byte) (*structs.Job, error) {
	return ParseAndValidateWith(filename, src, Options{})
}

// ParseAndValidateWith parses a job file and checks it with job.Validate,
// the same rules the server applies at submit time, so a CLI can refuse a
// bad job before it reaches the network. A validation failure is returned
// as a wrapped *structs.ValidationError.
func ParseAndValidateWith(filename string, src []byte, opts Options) (*structs.Job, error) {
	job, err := ParseWith(filename, src, opts)
	if err != nil {
		return nil, err
	}
	if err := job.Validate(); err != nil {
		return nil, fmt.Errorf("%s: invalid job: %w", filename, err)
	}
	return job, nil
}

// Check parses a job file and validates it as ParseAndValidateWith does,
// but returns every problem as a positioned *Error: the parse errors, or,
// when the file parses, each of the job's validation errors at the block
// it names (a task, a group, or the job). It is what `job validate`
// prints.
func Check(filename string, src []byte, opts Options) (*structs.Job, error) {
	job, p, err := parseFile(filename, src, opts)
	if err != nil {
		return nil, err
	}
	job.Canonicalize()
	verr := job.Validate()
	if verr == nil {
		return job, nil
	}
	var ve *structs.ValidationError
	msgs := []string{verr.Error()}
	if errors.As(verr, &ve) {
		msgs = ve.Errors
	}
	var diags hcl.Diagnostics
	for _, m := range msgs {
		rng := p.blockFor(blockKeyOf(job, m))
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid job", Detail: m, Subject: &rng})
	}
	p.redact(diags)
	sortDiags(diags)
	return nil, &Error{Diags: diags}
}

// blockFor returns the position of the block a validation message names
// by its prefix (`group "g": task "t": …`), the job's by default.
func (p *parser) blockFor(msg string) hcl.Range {
	best, at := -1, p.blockAt[""]
	for key, rng := range p.blockAt {
		if key != "" && strings.HasPrefix(msg, key+":") && len(key) > best {
			best, at = len(key), rng
		}
	}
	return at
}

// boundsPath matches the group and task of a field path in a bounds error
// (structs.CheckBounds): `Job.TaskGroups[0].Tasks[1].Env["X"]: …`.
var boundsPath = regexp.MustCompile(`^Job\.TaskGroups\[(\d+)\](?:\.Tasks\[(\d+)\])?`)

// blockKeyOf prefixes a bounds error with the block its path is in
// (`group "g": task "t": `), the way the other validation errors name it,
// so that blockFor finds the block's position; other messages are
// returned as they are.
func blockKeyOf(job *structs.Job, msg string) string {
	m := boundsPath.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	gi, _ := strconv.Atoi(m[1])
	if gi >= len(job.TaskGroups) || job.TaskGroups[gi] == nil {
		return msg
	}
	tg := job.TaskGroups[gi]
	key := fmt.Sprintf("group %q", tg.Name)
	if m[2] != "" {
		if ti, _ := strconv.Atoi(m[2]); ti < len(tg.Tasks) && tg.Tasks[ti] != nil {
			key += fmt.Sprintf(": task %q", tg.Tasks[ti].Name)
		}
	}
	return key + ": " + msg
}

// Diagnostics extracts the positioned diagnostics from an error returned by
// this package, or nil when err did not come from the parser.
func Diagnostics(err error) hcl.Diagnostics {
	var e *Error
	if errors.As(err, &e) {
		return e.Diags
	}
	return nil
}

// Locator places the messages of a server's refusal of a parsed job file
// (its validation errors, which name the block they concern: `group "g":
// task "t": vault: …`) at that block's position in the file, as `job
// validate` places its own.
type Locator struct {
	job *structs.Job
	p   *parser
}

// NewLocator parses the job file for the positions of its blocks; nil
// when it does not parse.
func NewLocator(filename string, src []byte, opts Options) *Locator {
	job, p, err := parseFile(filename, src, opts)
	if err != nil {
		return nil
	}
	job.Canonicalize()
	return &Locator{job: job, p: p}
}

// Annotate prefixes each message of text, a rendered validation error
// (one message, or "N errors occurred:" and a "\t* message" line per
// message), with "file:line:col: " of the block it names. A nil Locator
// returns text unchanged.
func (l *Locator) Annotate(text string) string {
	if l == nil {
		return text
	}
	place := func(msg string) string {
		rng := l.p.blockFor(blockKeyOf(l.job, msg))
		if rng.Filename == "" {
			return msg
		}
		return fmt.Sprintf("%s:%d:%d: %s", rng.Filename, rng.Start.Line, rng.Start.Column, msg)
	}
	lines := strings.Split(text, "\n")
	if len(lines) == 1 {
		return place(text)
	}
	for i, line := range lines {
		if m, ok := strings.CutPrefix(line, "\t* "); ok {
			lines[i] = "\t* " + place(m)
		}
	}
	return strings.Join(lines, "\n")
}
