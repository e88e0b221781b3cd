// Package safefs opens, creates, lists and removes files beneath a
// directory without ever following a symbolic link.
//
// drover's client and its drivers run as root inside directories that
// tasks can write to (an allocation's alloc/, local/, secrets/ and
// alloc/logs/). A task can plant a symlink there at any moment, so a path
// string joined and checked lexically, then handed to os.Open, may name a
// host file by the time it is opened. Every operation here resolves its
// path from an open directory, one component at a time, refusing any
// symlink on the way and any ".." out of the directory: with openat2's
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it, otherwise
// by opening each component with O_NOFOLLOW. There is no fallback to the
// unsafe way: a refusal is an error wrapping ErrUnsafePath that names the
// path.
//
// Files that are not regular (a FIFO a task planted to block the reader,
// a device) are refused by OpenFile as well: opening one could block or
// reach the host.
//
// The directory a Dir is opened on is trusted: its own path must not be
// writable by a task (an allocation's root is created by the client under
// its root-owned state directory; alloc/ inside it is not trusted).
package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsafePath is wrapped by every refusal: the path crosses a symbolic
// link, leaves its directory, is absolute, or names a file that is not a
// regular file where one is needed.
var ErrUnsafePath = errors.New("unsafe path")

// Dir is an open directory; every path given to its methods is relative
// to it and resolved beneath it. A Dir is safe for concurrent use.
type Dir struct {
	f    *os.File
	name string // for errors: the directory's path as opened
}

// Open opens the trusted directory path. Its last component must not be
// a symlink; its parents are trusted.
func Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOTDIR {
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP
		}
	}
	if err != nil {
		return nil, pathErr("open", path, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), name: path}, nil
}

// Close releases the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Name is the directory's path as it was opened.
func (d *Dir) Name() string { return d.name }

// Fd is the directory's descriptor, for an *at system call of the
// caller's own (the descriptor stays owned by d).
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// clean checks rel lexically: relative, and not leaving the directory.
// "" and "." name the directory itself.
func (d *Dir) clean(op, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", d.refuse(op, rel, "is absolute")
	}
	c := filepath.Clean(rel)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", d.refuse(op, rel, "leaves the directory")
	}
	return c, nil
}

func (d *Dir) refuse(op, rel, why string) error {
	return &fs.PathError{Op: op, Path: filepath.Join(d.name, rel), Err: fmt.Errorf("%w: %s", ErrUnsafePath, why)}
}

// pathErr turns a resolution errno into an error naming the path:
// ELOOP (a symlink on the way) and EXDEV (out of the directory) are
// ErrUnsafePath.
func pathErr(op, path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		err = fmt.Errorf("%w: crosses a symbolic link", ErrUnsafePath)
	case errors.Is(err, unix.EXDEV):
		err = fmt.Errorf("%w: leaves the directory", ErrUnsafePath)
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// openat2 support: 0 unknown, 1 available, 2 not available.
var openat2State atomic.Int32

// openBeneath opens rel (already clean) beneath dirfd with flags, never
// following a symlink, O_CLOEXEC always set.
func openBeneath(dirfd int, rel string, flags int, perm uint32) (int, error) {
	fd, err := openBeneath1(dirfd, rel, flags, perm)
	if err == unix.ENOTDIR && flags&unix.O_DIRECTORY != 0 {
		// O_DIRECTORY|O_NOFOLLOW on a symlink answers ENOTDIR: say what
		// it is.
		if pfd, perr := openBeneath1(dirfd, rel, unix.O_PATH, 0); perr == nil {
			var st unix.Stat_t
			if unix.Fstat(pfd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
			unix.Close(pfd)
		}
	}
	return fd, err
}

func openBeneath1(dirfd int, rel string, flags int, perm uint32) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if openat2State.Load() != 2 {
		how := &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
			how.Mode = uint64(perm)
		}
		for {
			fd, err := unix.Openat2(dirfd, rel, how)
			if err == unix.EINTR || err == unix.EAGAIN {
				// EAGAIN: a rename raced the lookup; resolve again.
				continue
			}
			if err == unix.ENOSYS || err == unix.EPERM && openat2State.Load() == 0 {
				// EPERM: a seccomp filter that refuses openat2; tell it
				// from a real permission error by probing once.
				if err == unix.ENOSYS || !openat2Works() {
					openat2State.Store(2)
					break
				}
			} else if err == nil {
				openat2State.Store(1)
			}
			return fd, err
		}
	}
	return walkBeneath(dirfd, rel, flags, perm)
}

// openat2Works probes openat2 on "/".
func openat2Works() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// walkBeneath is openBeneath without openat2: each component is opened
// with O_NOFOLLOW from its parent's descriptor. rel is clean, so it holds
// no "..".
func walkBeneath(dirfd int, rel string, flags int, perm uint32) (int, error) {
	if rel == "." {
		return unix.Openat(dirfd, ".", flags, perm)
	}
	parts := strings.Split(rel, "/")
	cur := dirfd
	defer func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}()
	for _, p := range parts[:len(parts)-1] {
		fd, err := unix.Openat(cur, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if err == unix.ENOTDIR {
				// O_DIRECTORY|O_NOFOLLOW on a symlink answers ENOTDIR.
				var st unix.Stat_t
				if unix.Fstatat(cur, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = unix.ELOOP
				}
			}
			return -1, err
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		cur = fd
	}
	return unix.Openat(cur, parts[len(parts)-1], flags, perm)
}

// OpenFile opens rel beneath d with os.OpenFile's flags. A symlink
// anywhere on the path, the last component included, is refused; so is
// anything but a regular file (unless flag has O_DIRECTORY). The open
// never blocks on a FIFO.
func (d *Dir) OpenFile(rel string, flag int, perm os.FileMode) (*os.File, error) {
	c, err := d.clean("open", rel)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(d.name, c)
	fd, err := openBeneath(d.Fd(), c, flag|unix.O_NONBLOCK, uint32(perm.Perm()))
	if err == unix.ENXIO {
		// A FIFO without a reader opened for writing, or a device with
		// nothing behind it: neither is a regular file.
		return nil, d.refuse("open", c, "not a regular file")
	}
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathErr("open", name, err)
	}
	kind := st.Mode & unix.S_IFMT
	if kind != unix.S_IFREG && !(kind == unix.S_IFDIR && flag&unix.O_DIRECTORY != 0) {
		unix.Close(fd)
		return nil, d.refuse("open", c, "not a regular file")
	}
	// O_NONBLOCK guarded the open; reads and writes of the file block as
	// usual (it has no effect on regular files, but leave no trace).
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Open opens rel for reading.
func (d *Dir) Open(rel string) (*os.File, error) { return d.OpenFile(rel, os.O_RDONLY, 0) }

// ReadFile reads rel whole, refusing a file over max bytes (max <= 0: no
// bound).
func (d *Dir) ReadFile(rel string, max int64) ([]byte, error) {
	f, err := d.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if max > 0 {
		r = io.LimitReader(f, max+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if max > 0 && int64(len(data)) > max {
		return nil, fmt.Errorf("%s: over the limit of %d bytes", f.Name(), max)
	}
	return data, nil
}

// OpenDir opens the directory rel beneath d as a Dir of its own.
func (d *Dir) OpenDir(rel string) (*Dir, error) {
	c, err := d.clean("open", rel)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(d.name, c)
	fd, err := openBeneath(d.Fd(), c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), name), name: name}, nil
}

// MkdirAll creates rel and any missing parents beneath d with perm
// (before umask), refusing a symlink in place of any of them.
func (d *Dir) MkdirAll(rel string, perm os.FileMode) error {
	sub, err := d.mkdirAll(rel, perm)
	if err != nil {
		return err
	}
	return sub.Close()
}

// MkdirAllOpen is MkdirAll that returns the directory open.
func (d *Dir) MkdirAllOpen(rel string, perm os.FileMode) (*Dir, error) { return d.mkdirAll(rel, perm) }

func (d *Dir) mkdirAll(rel string, perm os.FileMode) (*Dir, error) {
	c, err := d.clean("mkdir", rel)
	if err != nil {
		return nil, err
	}
	cur := d
	if c == "." {
		return d.OpenDir(".")
	}
	for _, p := range strings.Split(c, "/") {
		err := unix.Mkdirat(cur.Fd(), p, uint32(perm.Perm()))
		if err != nil && err != unix.EEXIST {
			if cur != d {
				cur.Close()
			}
			return nil, pathErr("mkdir", filepath.Join(cur.name, p), err)
		}
		next, err := cur.OpenDir(p)
		if cur != d {
			cur.Close()
		}
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// OpenPath opens rel beneath d as an O_PATH descriptor: one that neither
// reads nor writes, and so opens anything (a directory, a device, a FIFO,
// without blocking), for fstat, an *at system call or a /proc/self/fd
// path naming exactly that file (say a mount target). A symlink anywhere
// on the path, the last component included, is refused.
func (d *Dir) OpenPath(rel string) (*os.File, error) {
	c, err := d.clean("open", rel)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(d.name, c)
	fd, err := openBeneath(d.Fd(), c, unix.O_PATH, 0)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathErr("open", name, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return nil, d.refuse("open", c, "crosses a symbolic link")
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Lstat describes rel without following it: a symlink at the end is
// reported as one; a symlink on the way is refused.
func (d *Dir) Lstat(rel string) (os.FileInfo, error) {
	c, err := d.clean("lstat", rel)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(d.name, c)
	fd, err := openBeneath(d.Fd(), c, unix.O_PATH, 0)
	if err != nil {
		return nil, pathErr("lstat", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return f.Stat()
}

// ReadDir lists the directory rel, as os.ReadDir does (sorted by name;
// entries are not followed).
func (d *Dir) ReadDir(rel string) ([]os.DirEntry, error) {
	sub, err := d.OpenDir(rel)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	// A fresh descriptor: reading the listing moves its offset.
	f, err := sub.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, nil
}

// parent opens rel's parent beneath d and returns it with rel's last
// component; the caller closes the parent unless it is d.
func (d *Dir) parent(op, rel string) (*Dir, string, error) {
	c, err := d.clean(op, rel)
	if err != nil {
		return nil, "", err
	}
	if c == "." {
		return nil, "", d.refuse(op, rel, "names the directory itself")
	}
	dir, base := filepath.Split(c)
	if dir == "" {
		return d, base, nil
	}
	p, err := d.OpenDir(dir)
	if err != nil {
		return nil, "", err
	}
	return p, base, nil
}

func (d *Dir) release(p *Dir) {
	if p != d {
		p.Close()
	}
}

// Remove removes the file or empty directory rel (a symlink itself, not
// its target).
func (d *Dir) Remove(rel string) error {
	p, base, err := d.parent("remove", rel)
	if err != nil {
		return err
	}
	defer d.release(p)
	err = unix.Unlinkat(p.Fd(), base, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		if err2 := unix.Unlinkat(p.Fd(), base, unix.AT_REMOVEDIR); err2 != unix.ENOTDIR {
			err = err2
		}
	}
	if err != nil {
		return pathErr("remove", filepath.Join(p.name, base), err)
	}
	return nil
}

// Rename moves oldRel to newRel, both beneath d. A symlink at newRel is
// replaced, never followed.
func (d *Dir) Rename(oldRel, newRel string) error {
	op, obase, err := d.parent("rename", oldRel)
	if err != nil {
		return err
	}
	defer d.release(op)
	np, nbase, err := d.parent("rename", newRel)
	if err != nil {
		return err
	}
	defer d.release(np)
	if err := unix.Renameat(op.Fd(), obase, np.Fd(), nbase); err != nil {
		return pathErr("rename", filepath.Join(np.name, nbase), err)
	}
	return nil
}

var tmpSeq atomic.Uint64

// WriteFile writes data to rel atomically: into a new file beside it,
// then renamed over it, so a symlink planted at rel is replaced rather
// than written through, and a reader sees the old or the new content.
// Missing parents are created (0o755).
func (d *Dir) WriteFile(rel string, data []byte, perm os.FileMode) error {
	return d.writeFile(rel, data, perm, true)
}

// WriteFileNoSync is WriteFile without the fsync: a reader still sees the
// old or the new content, never a torn file, while the processes run, but
// a crash of the machine may lose the write. It is for records whose
// meaning ends with the boot (the exit status of a process), where the
// fsync costs a disk flush for nothing.
func (d *Dir) WriteFileNoSync(rel string, data []byte, perm os.FileMode) error {
	return d.writeFile(rel, data, perm, false)
}

func (d *Dir) writeFile(rel string, data []byte, perm os.FileMode, sync bool) error {
	f, commit, err := d.createAtomic(rel, perm, sync)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		commit(false)
		return err
	}
	return commit(true)
}

// CreateAtomic opens a new temporary file beside rel (creating missing
// parents). commit(true) syncs it and renames it over rel; commit(false)
// removes it. The file is closed by commit either way.
func (d *Dir) CreateAtomic(rel string, perm os.FileMode) (*os.File, func(ok bool) error, error) {
	return d.createAtomic(rel, perm, true)
}

func (d *Dir) createAtomic(rel string, perm os.FileMode, sync bool) (*os.File, func(ok bool) error, error) {
	c, err := d.clean("create", rel)
	if err != nil {
		return nil, nil, err
	}
	if c == "." {
		return nil, nil, d.refuse("create", rel, "names the directory itself")
	}
	dir, base := filepath.Split(c)
	p := d
	if dir != "" {
		if p, err = d.mkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
	}
	tmp := "." + base + ".tmp" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatUint(tmpSeq.Add(1), 36)
	f, err := p.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		d.release(p)
		return nil, nil, err
	}
	done := false
	commit := func(ok bool) error {
		if done {
			return nil
		}
		done = true
		defer d.release(p)
		if !ok {
			f.Close()
			_ = unix.Unlinkat(p.Fd(), tmp, 0)
			return nil
		}
		err := f.Chmod(perm.Perm()) // umask applied at create
		if err == nil && sync {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			if rerr := unix.Renameat(p.Fd(), tmp, p.Fd(), base); rerr != nil {
				err = pathErr("rename", filepath.Join(p.name, base), rerr)
			}
		}
		if err != nil {
			_ = unix.Unlinkat(p.Fd(), tmp, 0)
		}
		return err
	}
	return f, commit, nil
}
