package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// StringAttr evaluates an attribute that must be a literal string (no
// variables or functions exist here).
func StringAttr(a *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return "", diags
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", ErrDiag(a.Expr.Range(), "Incorrect attribute value type",
			fmt.Sprintf("%s must be a string.", a.Name))
	}
	return v.AsString(), nil
}

// StringMapAttr evaluates `meta = { k = "v" }`, the form for keys that
// are not identifiers.
func StringMapAttr(a *hcl.Attribute) (map[string]string, hcl.Diagnostics) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return nil, diags
	}
	bad := ErrDiag(a.Expr.Range(), "Incorrect attribute value type", fmt.Sprintf("%s must be an object of strings.", a.Name))
	if v.IsNull() || !v.IsWhollyKnown() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		return nil, bad
	}
	out := make(map[string]string, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, bad
		}
		out[k.AsString()] = e.AsString()
	}
	return out, nil
}

func ErrDiag(rng hcl.Range, summary, detail string) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}}
}

// DiagError joins error diagnostics, each as file:line:col: message, in
// the order of their positions.
func DiagError(diags hcl.Diagnostics) error {
	var errs []*hcl.Diagnostic
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			errs = append(errs, d)
		}
	}
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Subject, errs[j].Subject
		return a != nil && b != nil && a.Start.Byte < b.Start.Byte
	})
	lines := make([]string, 0, len(errs))
	for _, d := range errs {
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if s := d.Subject; s != nil {
			msg = fmt.Sprintf("%s:%d:%d: %s", s.Filename, s.Start.Line, s.Start.Column, msg)
		}
		lines = append(lines, msg)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// JSONPos names a byte offset of src as file:line:col, columns in bytes
// from 1.
func JSONPos(filename string, src []byte, offset int64) string {
	if offset > int64(len(src)) {
		offset = int64(len(src))
	}
	if offset < 0 {
		offset = 0
	}
	before := src[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("%s:%d:%d", filename, line, col)
}

func NSContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func LookupError(kind string, err error) string {
	var amb *AmbiguousError
	if errors.As(err, &amb) || errors.Is(err, ErrNoMatch) {
		return lookupMessage(err)
	}
	return fmt.Sprintf("Error querying %s: %s", kind, err)
}

func FormatJobList(jobs []*structs.JobListStub, showNamespace bool) string {
	header := "ID|Type|Priority|Status|Submit Date"
	if showNamespace {
		header = "ID|Namespace|Type|Priority|Status|Submit Date"
	}
	rows := []string{header}
	for _, j := range jobs {
		ns := ""
		if showNamespace {
			ns = j.Namespace + "|"
		}
		rows = append(rows, fmt.Sprintf("%s|%s%s|%d|%s|%s", j.ID, ns,
			jobTypeString(j.Type, j.Periodic, j.ParameterizedJob), j.Priority, j.Status, FormatUnixNano(j.SubmitTime)))
	}
	return FormatList(rows)
}

// NodeArg resolves the node a command names: -self or an ID prefix.
func (m *Meta) NodeArg(ctx context.Context, client *APIClient, self bool, arg string) (string, error) {
	if self {
		id, err := localNodeID(ctx, client)
		if err != nil {
			return "", fmt.Errorf("Error determining local node ID: %s", err)
		}
		return id, nil
	}
	id, err := resolveNodeID(ctx, client, arg)
	if err != nil {
		return "", fmt.Errorf("%s", LookupError("node", err))
	}
	return id, nil
}

func FormatNodeStubs(nodes []*structs.NodeListStub, verbose bool) string {
	rows := []string{"ID|Node Pool|DC|Name|Class|Drain|Eligibility|Status"}
	for _, n := range nodes {
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%s|%s|%t|%s|%s", LimitID(n.ID, verbose), n.NodePool, n.Datacenter,
			n.Name, OrNone(n.NodeClass), n.Drain, n.SchedulingEligibility, n.Status))
	}
	return FormatList(rows)
}
