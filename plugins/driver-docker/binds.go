package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/safefs"
)

// stagingDirName holds, in the task dir, the staged bind sources of a
// container being started.
const stagingDirName = ".drover-binds"

// The engine runs as root and follows symlinks in a bind mount's source
// when it starts the container. A task can write to its alloc/ and local/
// (and what it binds), so a source there could be a link to a host
// directory by then: a task that replaced local/data by a link to / before
// a restart would get the host's root bound into its container.
//
// Every bind source beneath the allocation directory is therefore checked
// before the container is created: resolved beneath the allocation
// directory without following a symlink (sdk/safefs; a missing directory
// is created there, never by the engine), and held open. Then:
//
//   - A source whose parent no task can write (alloc/ itself, and
//     <task>/local, <task>/secrets or any other directory right in a task
//     dir: the allocation directory, the task dirs and the drivers'
//     .drover* files in them are never bound, see binds) cannot be
//     swapped between the check and the engine's mount, so it is given
//     to the engine as it is.
//   - A source deeper down (alloc/data, local/cfg) could be swapped by a
//     task still running (a sibling in the same allocation) after the
//     check. The driver bind-mounts the very directory it holds open
//     (through /proc/self/fd, which names the open file, not a path) on a
//     staging directory in the task dir, and gives the engine that path,
//     in which no component is a task's to write. The staging mounts are
//     removed once the container started: the container holds its own.
//
// Binding /proc/<pid>/fd/<n> straight into the container would be simpler,
// but the runtime mounts sources from inside the container's new mount
// namespace, where a descriptor of the host's namespace is refused
// (EINVAL); the staging mount is made in the driver's, the engine's own.
type pinnedBinds struct {
	staged []string // staging mount points to undo
}

// pinBinds checks and pins the bind sources of binds beneath cfg's
// allocation directory, returning the binds to give the engine. release
// undoes the staging once the engine started the container (or failed to);
// pinBinds undoes it itself when it fails.
func pinBinds(cfg *driverpb.TaskConfig, binds []string) (out []string, release func(), err error) {
	allocDir := filepath.Clean(cfg.GetAllocDir())
	taskRel, err := driver.RelBeneath(allocDir, filepath.Clean(cfg.GetTaskDir()))
	if err != nil || strings.Contains(taskRel, "/") {
		return nil, nil, fmt.Errorf("%w: task_dir %q must be a directory right in alloc_dir %q", driver.ErrInvalidConfig, cfg.GetTaskDir(), allocDir)
	}
	root, err := safefs.Open(allocDir)
	if err != nil {
		return nil, nil, fmt.Errorf("bind sources: %w", err)
	}
	defer root.Close()
	p := &pinnedBinds{}
	staging := filepath.Join(taskRel, stagingDirName)
	// A staging mount left by a driver that died in a start is undone.
	p.sweep(root, staging)
	out = make([]string, 0, len(binds))
	for i, b := range binds {
		src, rest, _ := strings.Cut(b, ":")
		if !strings.HasPrefix(src, allocDir+"/") {
			out = append(out, b) // an absolute host path the operator allowed
			continue
		}
		pinned, err := p.pin(root, src, filepath.Join(staging, strconv.Itoa(i)))
		if err != nil {
			p.release()
			return nil, nil, fmt.Errorf("bind source %s: %w", src, err)
		}
		out = append(out, pinned+":"+rest)
	}
	return out, p.release, nil
}

// pin checks src (beneath root) and returns the path to give the engine:
// src itself when no task can swap it, else a staging mount of it at
// stage.
func (p *pinnedBinds) pin(root *safefs.Dir, src, stage string) (string, error) {
	rel, err := driver.RelBeneath(root.Name(), src)
	if err != nil {
		return "", err
	}
	f, isDir, err := openSource(root, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if parent := filepath.Dir(rel); parent == "." || !strings.Contains(parent, "/") && parent != sharedDir {
		return src, nil
	}
	// The staging point: a directory, or an empty file for a file source.
	var target *os.File
	if isDir {
		d, err := root.MkdirAllOpen(stage, 0o700)
		if err != nil {
			return "", err
		}
		target, err = d.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
		_ = d.Close()
		if err != nil {
			return "", err
		}
	} else {
		if err := root.MkdirAll(filepath.Dir(stage), 0o700); err != nil {
			return "", err
		}
		target, err = root.OpenFile(stage, os.O_RDONLY|os.O_CREATE, 0o600)
		if err != nil {
			return "", err
		}
	}
	defer target.Close()
	if err := unix.Mount(procFD(f), procFD(target), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return "", fmt.Errorf("stage bind mount: %w", err)
	}
	abs := filepath.Join(root.Name(), stage)
	p.staged = append(p.staged, abs)
	return abs, nil
}

const sharedDir = "alloc"

func procFD(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// openSource opens the bind source rel beneath root without following a
// symlink: a directory (created when missing, as the engine would have) or
// a regular file.
func openSource(root *safefs.Dir, rel string) (f *os.File, isDir bool, err error) {
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return nil, false, err
		}
		fi, err = root.Lstat(rel)
	}
	if err != nil {
		return nil, false, err
	}
	switch {
	case fi.IsDir():
		f, err = root.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY, 0)
		return f, true, err
	case fi.Mode().IsRegular():
		f, err = root.OpenFile(rel, os.O_RDONLY, 0)
		return f, false, err
	}
	return nil, false, &fs.PathError{Op: "bind", Path: filepath.Join(root.Name(), rel),
		Err: fmt.Errorf("%w: a %v, not a directory or a regular file", safefs.ErrUnsafePath, fi.Mode().Type())}
}

// release undoes the staging mounts (lazily: the engine may still hold
// them for a moment) and removes their mount points.
func (p *pinnedBinds) release() {
	for _, s := range p.staged {
		_ = unix.Unmount(s, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		_ = os.Remove(s)
	}
	p.staged = nil
}

// sweep undoes the staging mounts a driver that died mid-start left.
func (p *pinnedBinds) sweep(root *safefs.Dir, staging string) {
	ents, err := root.ReadDir(staging)
	if err != nil {
		return
	}
	for _, e := range ents {
		s := filepath.Join(root.Name(), staging, e.Name())
		_ = unix.Unmount(s, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		_ = os.Remove(s)
	}
}
