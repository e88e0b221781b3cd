package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/golang/snappy"

	"github.com/drover-org/drover/sdk/safefs"
)

// Directory names inside an alloc dir, as in Nomad.
const (
	sharedDirName  = "alloc"   // <alloc>/alloc, shared by the group's tasks
	logDirName     = "logs"    // <alloc>/alloc/logs
	dataDirName    = "data"    // <alloc>/alloc/data
	localDirName   = "local"   // <alloc>/<task>/local = NOMAD_TASK_DIR
	secretsDirName = "secrets" // <alloc>/<task>/secrets
	tmpDirName     = "tmp"
)

// errPathEscapes refuses a file path that would leave the directory it is
// meant to stay in.
var errPathEscapes = errors.New("path escapes its directory")

// allocDir is the on-disk layout of one allocation:
//
//	<root>/alloc/           shared dir (NOMAD_ALLOC_DIR)
//	<root>/alloc/logs/      <task>.stdout.N, <task>.stderr.N
//	<root>/alloc/data/, tmp/
//	<root>/<task>/          the task's working directory
//	<root>/<task>/local/    NOMAD_TASK_DIR
//	<root>/<task>/secrets/  NOMAD_SECRETS_DIR (0700)
//	<root>/<task>/tmp/
type allocDir struct {
	root string
}

func newAllocDir(allocsRoot, allocID string) *allocDir {
	return &allocDir{root: filepath.Join(allocsRoot, allocID)}
}

func (d *allocDir) sharedDir() string { return filepath.Join(d.root, sharedDirName) }
func (d *allocDir) logDir() string    { return filepath.Join(d.root, sharedDirName, logDirName) }

// taskDirs are the directories of one task.
type taskDirs struct {
	Dir, Local, Secrets, Tmp string
}

func (d *allocDir) task(name string) taskDirs {
	dir := filepath.Join(d.root, name)
	return taskDirs{
		Dir:     dir,
		Local:   filepath.Join(dir, localDirName),
		Secrets: filepath.Join(dir, secretsDirName),
		Tmp:     filepath.Join(dir, tmpDirName),
	}
}

// logBase is the base path of a task's stream ("stdout"/"stderr"): the
// driver writes it rotated, to <base>.0, <base>.1, ...
func (d *allocDir) logBase(task, stream string) string {
	return filepath.Join(d.logDir(), fmt.Sprintf("%s.%s", task, stream))
}

// open opens the alloc dir as the trusted root beneath which every file
// operation on behalf of its tasks resolves: the root itself is created by
// the client under its own directory, while alloc/, <task>/local/,
// <task>/secrets/ and what is in them can be written by the tasks, which
// may plant symlinks there.
func (d *allocDir) open() (*safefs.Dir, error) { return safefs.Open(d.root) }

// create creates the alloc dir itself (its parents are the client's) and
// opens it.
func (d *allocDir) create() (*safefs.Dir, error) {
	if err := os.MkdirAll(d.root, 0o755); err != nil {
		return nil, err
	}
	return d.open()
}

// buildShared creates the shared part of the alloc dir. It is idempotent,
// so a restored alloc can call it again; a directory a task replaced by a
// symlink is refused, naming it.
func (d *allocDir) buildShared() error {
	root, err := d.create()
	if err != nil {
		return fmt.Errorf("create alloc dir: %w", err)
	}
	defer root.Close()
	// The subdirectories are made beneath alloc/ open, rather than each
	// from the root: alloc/ is then looked up (and checked) once.
	shared, err := root.MkdirAllOpen(sharedDirName, 0o755)
	if err != nil {
		return fmt.Errorf("create alloc dir: %w", err)
	}
	defer shared.Close()
	for _, p := range []string{logDirName, dataDirName, tmpDirName} {
		if err := shared.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("create alloc dir: %w", err)
		}
	}
	return nil
}

// buildTask creates a task's directories beneath the alloc dir, refusing
// one a task replaced by a symlink. The task name becomes a path element,
// so one that could point elsewhere is refused.
func (d *allocDir) buildTask(name string) (taskDirs, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || name == sharedDirName {
		return taskDirs{}, fmt.Errorf("task name %q cannot be a directory name", name)
	}
	root, err := d.create()
	if err != nil {
		return taskDirs{}, fmt.Errorf("create task dir: %w", err)
	}
	defer root.Close()
	td, err := root.MkdirAllOpen(name, 0o755)
	if err != nil {
		return taskDirs{}, fmt.Errorf("create task dir: %w", err)
	}
	defer td.Close()
	for _, p := range []string{localDirName, tmpDirName} {
		if err := td.MkdirAll(p, 0o755); err != nil {
			return taskDirs{}, fmt.Errorf("create task dir: %w", err)
		}
	}
	if err := td.MkdirAll(secretsDirName, 0o700); err != nil {
		return taskDirs{}, fmt.Errorf("create secrets dir: %w", err)
	}
	return d.task(name), nil
}

// destroy removes the alloc dir and everything in it (os.RemoveAll
// removes a symlink, never what it points to).
func (d *allocDir) destroy() error { return os.RemoveAll(d.root) }

// writeDispatchPayload decodes a dispatched job's snappy-compressed payload
// into file, relative to the task's local dir. The file may name
// subdirectories but may not leave local/; it is written beneath the
// alloc dir without following a symlink (a planted link at file is
// replaced, one on the way refused).
func (d *allocDir) writeDispatchPayload(task, file string, compressed []byte) error {
	if _, err := containedPath(localDirName, file); err != nil {
		return err
	}
	data, err := snappy.Decode(nil, compressed)
	if err != nil {
		return fmt.Errorf("decompress dispatch payload: %w", err)
	}
	root, err := d.open()
	if err != nil {
		return fmt.Errorf("write dispatch payload: %w", err)
	}
	defer root.Close()
	if err := root.WriteFile(filepath.Join(task, localDirName, file), data, 0o644); err != nil {
		return fmt.Errorf("write dispatch payload: %w", err)
	}
	return nil
}

// containedPath joins rel to dir and refuses a result outside dir.
func containedPath(dir, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %q must be a relative file path", errPathEscapes, rel)
	}
	p := filepath.Join(dir, rel)
	r, err := filepath.Rel(dir, p)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q", errPathEscapes, rel)
	}
	return p, nil
}
