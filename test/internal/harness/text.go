package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// WriteFile writes content to name in a fresh temp dir of the test and
// returns its path (a job file for the CLI, say).
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var columnGap = regexp.MustCompile(`\s{2,}`)

// Table parses the CLI's column output (a header row, then rows; columns
// apart by two or more spaces) into one map per row, keyed by header.
func Table(lines []string) []map[string]string {
	if len(lines) == 0 {
		return nil
	}
	header := columnGap.Split(strings.TrimSpace(lines[0]), -1)
	var rows []map[string]string
	for _, l := range lines[1:] {
		cells := columnGap.Split(strings.TrimSpace(l), -1)
		row := map[string]string{}
		for i, h := range header {
			if i < len(cells) {
				row[h] = cells[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// Lines splits command output into its lines, without the trailing blank.
func Lines(out string) []string {
	out = strings.TrimSpace(out)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}
