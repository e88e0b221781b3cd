package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// shortIDLength is how much of a UUID the tables show, as Nomad does.
const shortIDLength = 8

// LimitID shortens id unless verbose.
func LimitID(id string, verbose bool) string {
	if verbose || len(id) <= shortIDLength {
		return id
	}
	return id[:shortIDLength]
}

// FormatList aligns "a|b|c" rows into columns two spaces apart (Nomad's
// columnize layout). The last column is not padded.
func FormatList(rows []string) string {
	if len(rows) == 0 {
		return ""
	}
	cells := make([][]string, len(rows))
	var widths []int
	for i, r := range rows {
		cells[i] = strings.Split(r, "|")
		for j, c := range cells[i] {
			if j >= len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], len(strings.TrimSpace(c)))
		}
	}
	var b strings.Builder
	for i, row := range cells {
		if i > 0 {
			b.WriteByte('\n')
		}
		var line strings.Builder
		for j, c := range row {
			c = strings.TrimSpace(c)
			if j == len(row)-1 {
				line.WriteString(c)
				break
			}
			fmt.Fprintf(&line, "%-*s  ", widths[j], c)
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
	}
	return b.String()
}

// FormatKV aligns "Key|Value" rows as "Key = Value".
func FormatKV(rows []string) string {
	width := 0
	for _, r := range rows {
		k, _, _ := strings.Cut(r, "|")
		width = max(width, len(k))
	}
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteByte('\n')
		}
		k, v, _ := strings.Cut(r, "|")
		fmt.Fprintf(&b, "%-*s = %s", width, k, v)
	}
	return b.String()
}

// FormatTime renders a timestamp the way Nomad's CLI does (RFC 3339 in
// local time).
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return "N/A"
	}
	return t.Local().Format(time.RFC3339)
}

func FormatUnixNano(ns int64) string {
	if ns == 0 {
		return "N/A"
	}
	return FormatTime(time.Unix(0, ns))
}

// PrettyTimeDiff renders the time from then to now as "5m3s ago", keeping
// the two largest units like Nomad.
func PrettyTimeDiff(then, now time.Time) string {
	if then.IsZero() || then.Unix() == 0 {
		return "N/A"
	}
	d := now.Sub(then).Round(time.Second)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, " from now"
	}
	return ShortDuration(d) + suffix
}

// ShortDuration renders d with its two largest units: "3d2h", "1h5m", "7s".
func ShortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	units := []struct {
		name string
		size time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}}
	var parts []string
	for _, u := range units {
		if n := d / u.size; n > 0 || (len(parts) == 0 && u.name == "s") {
			parts = append(parts, fmt.Sprintf("%d%s", n, u.name))
			d -= n * u.size
		}
		if len(parts) == 2 || (len(parts) == 1 && d == 0) {
			break
		}
	}
	return strings.Join(parts, "")
}

// HumanMiB renders a size given in MiB as "300 MiB" or "7.7 GiB".
func HumanMiB(mb int64) string {
	return humanBytes(uint64(max(mb, 0)) * 1024 * 1024)
}

// humanBytes renders bytes with binary units, one decimal when below 10.
func humanBytes(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(b)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 || v >= 10 {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

func OrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// PrettyJSON re-indents raw API JSON for -json output.
func PrettyJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "    "); err != nil {
		return string(raw)
	}
	return b.String()
}

// ToJSON renders v indented for -json output.
func ToJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Sprintf("error encoding JSON: %v", err)
	}
	return string(b)
}

// FormatAllocMetrics explains why a group could not be placed, one bullet
// per reason, indented by prefix (Nomad's wording, so that scripts and
// people who know Nomad read it unchanged).
func FormatAllocMetrics(m *structs.AllocMetric, prefix string) string {
	if m == nil {
		return ""
	}
	var lines []string
	add := func(format string, args ...any) {
		lines = append(lines, prefix+"* "+fmt.Sprintf(format, args...))
	}
	if m.NodesEvaluated == 0 {
		add("No nodes were eligible for evaluation")
		if m.NodePool != "" && m.NodesInPool == 0 {
			add("No nodes are available in node pool %q", m.NodePool)
		}
	}
	for _, dc := range SortedKeys(m.NodesAvailable) {
		if m.NodesAvailable[dc] == 0 {
			add("No nodes are available in datacenter %q", dc)
		}
	}
	for _, class := range SortedKeys(m.ClassFiltered) {
		add("Class %q: %d nodes excluded by filter", class, m.ClassFiltered[class])
	}
	for _, c := range SortedKeys(m.ConstraintFiltered) {
		add("Constraint %q: %d nodes excluded by filter", c, m.ConstraintFiltered[c])
	}
	if m.NodesExhausted > 0 {
		add("Resources exhausted on %d nodes", m.NodesExhausted)
	}
	for _, class := range SortedKeys(m.ClassExhausted) {
		add("Class %q exhausted on %d nodes", class, m.ClassExhausted[class])
	}
	for _, dim := range SortedKeys(m.DimensionExhausted) {
		add("Dimension %q exhausted on %d nodes", dim, m.DimensionExhausted[dim])
	}
	for _, q := range m.QuotaExhausted {
		add("Quota limit hit %q", q)
	}
	return strings.Join(lines, "\n")
}

// FormatFailedTGAllocs renders an eval's placement failures group by group.
func FormatFailedTGAllocs(failed map[string]*structs.AllocMetric, prefix string) string {
	var parts []string
	for _, tg := range SortedKeys(failed) {
		m := failed[tg]
		n := 1 + m.CoalescedFailures
		noun := "allocation"
		if n > 1 {
			noun += "s"
		}
		s := fmt.Sprintf("%sTask Group %q (failed to place %d %s):", prefix, tg, n, noun)
		if body := FormatAllocMetrics(m, prefix+"  "); body != "" {
			s += "\n" + body
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n\n")
}

// FormatAllocStubs is the allocation table of `job status` and `node status`.
func FormatAllocStubs(allocs []*structs.AllocListStub, verbose bool, now time.Time) string {
	sorted := append([]*structs.AllocListStub(nil), allocs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].CreateIndex > sorted[j].CreateIndex })
	rows := []string{"ID|Node ID|Task Group|Version|Desired|Status|Created|Modified"}
	for _, a := range sorted {
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s|%s",
			LimitID(a.ID, verbose), LimitID(a.NodeID, verbose), a.TaskGroup, a.JobVersion,
			a.DesiredStatus, a.ClientStatus,
			PrettyTimeDiff(time.Unix(0, a.CreateTime), now), PrettyTimeDiff(time.Unix(0, a.ModifyTime), now)))
	}
	return FormatList(rows)
}

func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
