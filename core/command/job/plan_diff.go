package job

import (
	"fmt"
	"sort"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// Rendering of a plan's JobDiff as Nomad's `job plan` shows it: a marker
// ("+", "-", "+/-", or blanks for unchanged) before each line, markers of
// siblings padded to one width, field names padded so that values line up,
// nested blocks indented by two and closed by a brace under their name.
// The fields of a job, group or task are shown only when it is edited (an
// added or deleted one is summed up by its line), and only changed ones;
// verbose shows them all.

// formatJobDiff renders d; updates labels each group's line with the
// plan's counts.
func formatJobDiff(d *structs.JobDiff, updates map[string]*structs.DesiredUpdates, verbose bool) string {
	var b strings.Builder
	width := max(markerWidth(d.Fields, d.Objects), len(diffMarkers[d.Type]))
	for _, tg := range d.TaskGroups {
		width = max(width, len(diffMarkers[tg.Type]))
	}
	fmt.Fprintf(&b, "%sJob: %q\n", padMarker(d.Type, width), d.ID)
	if d.Type == structs.DiffTypeEdited || verbose {
		writeFieldsAndObjects(&b, d.Fields, d.Objects, 0, width, verbose)
	}
	seen := map[string]bool{}
	for _, tg := range d.TaskGroups {
		seen[tg.Name] = true
		writeGroupDiff(&b, tg, updates[tg.Name], width, verbose)
	}
	// Groups the diff does not name (an agent that diffs only the job's
	// fields): the plan's counts alone.
	for _, name := range sortedNames(updates) {
		if u := updates[name]; !seen[name] {
			fmt.Fprintf(&b, "%sTask Group: %q (%s)\n", markerPrefix(groupMarker(u)), name, updateLabels(u))
		}
	}
	return b.String()
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func writeGroupDiff(b *strings.Builder, tg *structs.TaskGroupDiff, u *structs.DesiredUpdates, width int, verbose bool) {
	label := ""
	if u != nil {
		label = " (" + updateLabels(u) + ")"
	}
	fmt.Fprintf(b, "%sTask Group: %q%s\n", padMarker(tg.Type, width), tg.Name, label)
	show := tg.Type == structs.DiffTypeEdited || verbose
	inner := 0
	if show {
		inner = markerWidth(tg.Fields, tg.Objects)
	}
	for _, t := range tg.Tasks {
		inner = max(inner, len(diffMarkers[t.Type]))
	}
	if show {
		writeFieldsAndObjects(b, tg.Fields, tg.Objects, 2, inner, verbose)
	}
	for _, t := range tg.Tasks {
		ann := ""
		if len(t.Annotations) > 0 {
			ann = " (" + strings.Join(t.Annotations, ", ") + ")"
		}
		fmt.Fprintf(b, "  %sTask: %q%s\n", padMarker(t.Type, inner), t.Name, ann)
		if t.Type == structs.DiffTypeEdited || verbose {
			writeFieldsAndObjects(b, t.Fields, t.Objects, 4, markerWidth(t.Fields, t.Objects), verbose)
		}
	}
}

// writeFieldsAndObjects writes fields, then objects, at indent with markers
// padded to width. Unchanged fields are context inside a block (showNone)
// and noise on a job, group or task, where Nomad leaves them out too.
func writeFieldsAndObjects(b *strings.Builder, fields []*structs.FieldDiff, objects []*structs.ObjectDiff, indent, width int, showNone bool) {
	pad := strings.Repeat(" ", indent)
	if !showNone {
		var changed []*structs.FieldDiff
		for _, f := range fields {
			if f.Type != structs.DiffTypeNone {
				changed = append(changed, f)
			}
		}
		fields = changed
	}
	longest := 0
	for _, f := range fields {
		longest = max(longest, len(f.Name))
	}
	for _, f := range fields {
		gap := strings.Repeat(" ", longest-len(f.Name))
		var val string
		switch f.Type {
		case structs.DiffTypeAdded:
			val = fmt.Sprintf("%q", f.New)
		case structs.DiffTypeDeleted:
			val = fmt.Sprintf("%q", f.Old)
		case structs.DiffTypeEdited:
			val = fmt.Sprintf("%q => %q", f.Old, f.New)
		default:
			val = fmt.Sprintf("%q", f.New)
		}
		if len(f.Annotations) > 0 {
			val += " (" + strings.Join(f.Annotations, ", ") + ")"
		}
		fmt.Fprintf(b, "%s%s%s: %s%s\n", pad, padMarker(f.Type, width), f.Name, gap, val)
	}
	for _, o := range objects {
		fmt.Fprintf(b, "%s%s%s {\n", pad, padMarker(o.Type, width), o.Name)
		writeFieldsAndObjects(b, o.Fields, o.Objects, indent+2, markerWidth(o.Fields, o.Objects), true)
		fmt.Fprintf(b, "%s%s}\n", pad, strings.Repeat(" ", width+1))
	}
}

// markerWidth is the widest marker among fields and objects.
func markerWidth(fields []*structs.FieldDiff, objects []*structs.ObjectDiff) int {
	w := 0
	for _, f := range fields {
		w = max(w, len(diffMarkers[f.Type]))
	}
	for _, o := range objects {
		w = max(w, len(diffMarkers[o.Type]))
	}
	return w
}

// padMarker is the marker of a diff type padded to width, then a space; an
// unchanged line at width 0 gets nothing.
func padMarker(typ string, width int) string {
	m := diffMarkers[typ]
	if width == 0 {
		return ""
	}
	return m + strings.Repeat(" ", width-len(m)) + " "
}
