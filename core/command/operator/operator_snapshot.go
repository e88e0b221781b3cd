package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/server/snapshotfile"
)

// OperatorSnapshotSaveCommand is `drover operator snapshot save [-stale] <file>`.
type OperatorSnapshotSaveCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorSnapshotSaveCommand) Synopsis() string {
	return "Save a snapshot of the cluster's state"
}

const operatorSnapshotSaveHelp = `
Usage: drover operator snapshot save [options] <file>

  Saves a snapshot of the whole cluster state (jobs, allocations, nodes,
  volumes and claims, ACL, join tokens and the cluster CA) to <file>. The
  file is checked end to end before it replaces <file>; it holds every
  secret of the cluster: keep it as such. Needs a management token.

Options:

  -stale
    Let any server answer with its own state instead of the leader's.`

func (c *OperatorSnapshotSaveCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator snapshot save", operatorSnapshotSaveHelp)
	var stale bool
	fs.BoolVar(&stale, "stale", false, "")
	file, code, ok := c.ParseOne(fs, args, "<file>")
	if !ok {
		return code
	}
	q := url.Values{}
	if stale {
		q.Set("stale", "true")
	}
	body, err := c.Client().Stream(context.Background(), "/v1/operator/snapshot", q)
	if err != nil {
		return c.ui.Errorf("Error saving the snapshot: %s", err)
	}
	defer body.Close()
	info, err := writeSnapshotFile(file, body)
	if err != nil {
		return c.ui.Errorf("Error saving the snapshot: %s", err)
	}
	c.ui.Printf("State file written to %s (index %d, %d bytes, sha256 %s)\n", file, info.Index, info.Size, info.SHA256)
	return cli.ExitOK
}

// writeSnapshotFile writes r to a temporary file beside path, syncs it,
// verifies it and only then renames it over path.
func writeSnapshotFile(path string, r io.Reader) (snapshotfile.Info, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return snapshotfile.Info{}, err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	defer tmp.Close()
	if _, err := io.Copy(tmp, r); err != nil {
		return snapshotfile.Info{}, err
	}
	if err := tmp.Sync(); err != nil {
		return snapshotfile.Info{}, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return snapshotfile.Info{}, err
	}
	info, err := snapshotfile.Verify(tmp, io.Discard, 0)
	if err != nil {
		return snapshotfile.Info{}, fmt.Errorf("the received snapshot is damaged, %s not written: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return snapshotfile.Info{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return snapshotfile.Info{}, err
	}
	return info, nil
}

// OperatorSnapshotRestoreCommand is `drover operator snapshot restore <file>`.
type OperatorSnapshotRestoreCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorSnapshotRestoreCommand) Synopsis() string {
	return "Restore the cluster's state from a snapshot"
}

const operatorSnapshotRestoreHelp = `
Usage: drover operator snapshot restore [options] <file>

  Replaces the whole cluster state with the snapshot in <file>, on every
  server. The file is checked here and again by the leader before anything
  changes: a damaged file is refused and the state is kept. Meant for
  disaster recovery, into a fresh cluster. Needs a management token.`

func (c *OperatorSnapshotRestoreCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator snapshot restore", operatorSnapshotRestoreHelp)
	file, code, ok := c.ParseOne(fs, args, "<file>")
	if !ok {
		return code
	}
	f, err := os.Open(file)
	if err != nil {
		return c.ui.Errorf("Error opening the snapshot: %s", err)
	}
	defer f.Close()
	if _, err := snapshotfile.Verify(f, io.Discard, 0); err != nil {
		return c.ui.Errorf("Error verifying the snapshot %s: %s", file, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return c.ui.Errorf("Error reading the snapshot: %s", err)
	}
	if err := c.Client().WriteBody(context.Background(), http.MethodPut, "/v1/operator/snapshot", f, nil); err != nil {
		return c.ui.Errorf("Error restoring the snapshot: %s", err)
	}
	c.ui.Printf("Snapshot Restored\n")
	return cli.ExitOK
}

// OperatorSnapshotInspectCommand is `drover operator snapshot inspect [-json] <file>`.
type OperatorSnapshotInspectCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorSnapshotInspectCommand) Synopsis() string {
	return "Show the metadata and contents of a snapshot file"
}

const operatorSnapshotInspectHelp = `
Usage: drover operator snapshot inspect [options] <file>

  Checks the snapshot in <file> and prints its ID, Raft index and term,
  size, SHA-256 and the number of objects in each table. Works offline.

Options:

  -json
    Print the result as JSON.`

// SnapshotInspect is what inspect prints.
type SnapshotInspect struct {
	snapshotfile.Info
	Tables map[string]int
}

func (c *OperatorSnapshotInspectCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator snapshot inspect", operatorSnapshotInspectHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	file, code, ok := c.ParseOne(fs, args, "<file>")
	if !ok {
		return code
	}
	out, err := inspectSnapshot(file)
	if err != nil {
		return c.ui.Errorf("Error inspecting the snapshot %s: %s", file, err)
	}
	if asJSON {
		b, _ := json.MarshalIndent(out, "", "  ")
		c.ui.Printf("%s\n", b)
		return cli.ExitOK
	}
	rows := [][2]string{
		{"ID", out.ID},
		{"Format", fmt.Sprint(out.Format)},
		{"Index", fmt.Sprint(out.Index)},
		{"Term", fmt.Sprint(out.Term)},
		{"Region", out.Region},
		{"Created", out.Created.Format("2006-01-02T15:04:05Z07:00")},
		{"Size", fmt.Sprint(out.Size)},
		{"Checksum", "sha256:" + out.SHA256},
	}
	for _, r := range rows {
		c.ui.Printf("%-10s %s\n", r[0], r[1])
	}
	tables := make([]string, 0, len(out.Tables))
	for t := range out.Tables {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	c.ui.Printf("\n%-24s %s\n", "Table", "Count")
	for _, t := range tables {
		c.ui.Printf("%-24s %d\n", t, out.Tables[t])
	}
	return cli.ExitOK
}

func inspectSnapshot(file string) (*SnapshotInspect, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tmp, err := os.CreateTemp("", "drover-inspect-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	info, err := snapshotfile.Verify(f, tmp, 0)
	if err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	out := &SnapshotInspect{Info: info, Tables: map[string]int{}}
	if err := fsm.ReadSnapshot(tmp, func(table string, _ any) error { out.Tables[table]++; return nil }); err != nil {
		return nil, fmt.Errorf("the state inside does not decode: %w", err)
	}
	return out, nil
}
