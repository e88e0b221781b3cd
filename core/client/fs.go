package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/safefs"
)

// Bounds of the allocation file system API (/v1/client/fs/*).
const (
	// MaxFSPathBytes bounds a path argument.
	MaxFSPathBytes = 4096
	// MaxFSListEntries bounds a directory listing: a task can create any
	// number of files, and a listing is answered in one body.
	MaxFSListEntries = 20000
	// fsChunk is the read size of a stream.
	fsChunk = 32 << 10
)

// Origins of AllocFSStream.
const (
	FSOriginStart = "start"
	FSOriginEnd   = "end"
)

// fsRel turns a path of the allocation file system API into a path
// relative to the allocation directory. As in Nomad, the path names a
// file of the allocation directory: a leading "/" is its root (never the
// host's), "" and "/" the root itself. A ".." component is refused, as is
// a NUL byte or an overlong path; so is anything under a task's secrets
// directory (<task>/secrets), which holds the task's credentials. Symlinks
// are refused later, at resolution, by safefs.
func fsRel(p string) (string, error) {
	if len(p) > MaxFSPathBytes {
		return "", structs.NewError(structs.ErrInvalid, "path: longer than %d bytes", MaxFSPathBytes)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", structs.NewError(structs.ErrInvalid, "path: contains a NUL byte")
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			return "", structs.NewError(structs.ErrInvalid, "path %q: must not contain \"..\"", p)
		default:
			parts = append(parts, c)
		}
	}
	if len(parts) >= 2 && parts[0] != sharedDirName && parts[1] == secretsDirName {
		return "", structs.NewError(structs.ErrPermissionDenied, "path %q: reading a task's secrets directory is not allowed", p)
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return strings.Join(parts, "/"), nil
}

// fsErr gives a file system error its kind: a missing file is not found,
// a symlink or other unsafe path is a refusal.
func fsErr(p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, safefs.ErrUnsafePath):
		return structs.NewError(structs.ErrPermissionDenied, "path %q: %v", p, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		return structs.NewError(structs.ErrNotFound, "path %q: no such file or directory", p)
	}
	return fmt.Errorf("path %q: %w", p, err)
}

// allocRoot opens the allocation directory of a running or finished
// allocation this client still holds. An unknown allocation, or one
// whose directory is gone, is structs.ErrNotFound.
func (c *Client) allocRoot(allocID string) (*safefs.Dir, *allocRunner, error) {
	ar := c.runner(allocID)
	if ar == nil {
		return nil, nil, structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	}
	root, err := ar.dir.open()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, structs.NewError(structs.ErrNotFound, "allocation %q has no directory on this node", allocID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open allocation directory: %w", err)
	}
	return root, ar, nil
}

// fileInfo is the API's view of st, a file named name.
func fileInfo(name string, st *unix.Stat_t) *clientapi.FileInfo {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return &clientapi.FileInfo{
		Name:     name,
		IsDir:    mode.IsDir(),
		Size:     st.Size,
		FileMode: mode.String(),
		ModTime:  time.Unix(st.Mtim.Unix()),
	}
}

// AllocFSList lists the directory p of an allocation (/v1/client/fs/ls),
// sorted by name. Entries are described without following them: a
// symlink a task made is listed as one, never resolved.
func (c *Client) AllocFSList(allocID, p string) ([]*clientapi.FileInfo, error) {
	rel, err := fsRel(p)
	if err != nil {
		return nil, err
	}
	root, _, err := c.allocRoot(allocID)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	dir, err := root.OpenDir(rel)
	if err != nil {
		return nil, fsErr(p, err)
	}
	defer dir.Close()
	// A fresh descriptor of the directory for the listing; names are
	// described relative to the directory's own descriptor, so a
	// directory swapped for a symlink meanwhile cannot redirect them.
	f, err := dir.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fsErr(p, err)
	}
	defer f.Close()
	var out []*clientapi.FileInfo
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if len(out) >= MaxFSListEntries {
				return nil, structs.NewError(structs.ErrTooLarge, "path %q: the directory has more than %d entries", p, MaxFSListEntries)
			}
			var st unix.Stat_t
			if err := unix.Fstatat(dir.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // removed since the listing
			}
			out = append(out, fileInfo(name, &st))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fsErr(p, err)
		}
	}
	sortFileInfos(out)
	return out, nil
}

func sortFileInfos(fi []*clientapi.FileInfo) {
	slices.SortFunc(fi, func(a, b *clientapi.FileInfo) int { return strings.Compare(a.Name, b.Name) })
}

// AllocFSStat describes the file p of an allocation (/v1/client/fs/stat);
// a regular file's ContentType is sniffed from its first 512 bytes. A
// symlink is refused, at the end of the path as anywhere on it.
func (c *Client) AllocFSStat(allocID, p string) (*clientapi.FileInfo, error) {
	rel, err := fsRel(p)
	if err != nil {
		return nil, err
	}
	root, _, err := c.allocRoot(allocID)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	pf, err := root.OpenPath(rel)
	if err != nil {
		return nil, fsErr(p, err)
	}
	defer pf.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(pf.Fd()), &st); err != nil {
		return nil, fsErr(p, err)
	}
	name := path.Base("/" + rel)
	if rel == "." {
		name = "/"
	}
	fi := fileInfo(name, &st)
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 {
		if f, err := root.Open(rel); err == nil {
			if singleLink(f) == nil {
				buf := make([]byte, 512)
				n, _ := io.ReadFull(f, buf)
				fi.ContentType = http.DetectContentType(buf[:n])
			}
			f.Close()
		}
	}
	return fi, nil
}

// AllocFSOpen opens the regular file p of an allocation for reading
// (/v1/client/fs/cat and readat). A directory is structs.ErrInvalid;
// a symlink, FIFO or device is refused.
func (c *Client) AllocFSOpen(allocID, p string) (*os.File, error) {
	rel, err := fsRel(p)
	if err != nil {
		return nil, err
	}
	root, _, err := c.allocRoot(allocID)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if rel != "." {
		if pf, err := root.OpenPath(rel); err == nil {
			var st unix.Stat_t
			isDir := unix.Fstat(int(pf.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
			pf.Close()
			if isDir {
				return nil, structs.NewError(structs.ErrInvalid, "path %q: is a directory", p)
			}
		}
	} else {
		return nil, structs.NewError(structs.ErrInvalid, "path %q: is a directory", p)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if err := singleLink(f); err != nil {
		f.Close()
		return nil, fsErr(p, err)
	}
	return f, nil
}

// singleLink refuses a file with more than one name: a hard link a task
// made to a file elsewhere on the filesystem (a host file it could not
// read itself) must not be served by the root client. Files the client
// and the drivers write in an alloc dir have one name.
func singleLink(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Nlink > 1 {
		return &fs.PathError{Op: "open", Path: f.Name(), Err: fmt.Errorf("%w: has %d links", safefs.ErrUnsafePath, st.Nlink)}
	}
	return nil
}

// FileStream is an open file of an allocation read as a stream
// (/v1/client/fs/stream). It is not safe for concurrent use.
type FileStream struct {
	f    *os.File
	pos  int64
	poll time.Duration
	stop <-chan struct{}
}

// AllocFSStream opens the regular file p of an allocation for streaming
// from offset bytes past origin ("start", the default, or "end"); an
// offset past either end is clamped to the file.
func (c *Client) AllocFSStream(allocID, p, origin string, offset int64) (clientapi.FileStream, error) {
	switch origin {
	case "":
		origin = FSOriginStart
	case FSOriginStart, FSOriginEnd:
	default:
		return nil, structs.NewError(structs.ErrInvalid, "origin: must be %q or %q, not %q", FSOriginStart, FSOriginEnd, origin)
	}
	if offset < 0 {
		return nil, structs.NewError(structs.ErrInvalid, "offset: must not be negative")
	}
	f, err := c.AllocFSOpen(allocID, p)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fsErr(p, err)
	}
	size := info.Size()
	pos := min(offset, size)
	if origin == FSOriginEnd {
		pos = max(size-offset, 0)
	}
	return &FileStream{f: f, pos: pos, poll: c.cfg.LogPollInterval, stop: c.ctx.Done()}, nil
}

// Offset is the position of the next byte Copy writes.
func (s *FileStream) Offset() int64 { return s.pos }

// Close releases the file.
func (s *FileStream) Close() error { return s.f.Close() }

// Copy writes the file from the stream's position to w. With follow it
// keeps writing what is appended until ctx ends or the client shuts down
// (both a nil error); a file truncated below the position is read again
// from its start. Without follow it returns at the end of the file.
func (s *FileStream) Copy(ctx context.Context, follow bool, w io.Writer) error {
	buf := make([]byte, fsChunk)
	for {
		n, err := s.f.ReadAt(buf, s.pos)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			s.pos += int64(n)
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		if !follow {
			return nil
		}
		if n > 0 {
			continue
		}
		if info, serr := s.f.Stat(); serr == nil && info.Size() < s.pos {
			s.pos = 0
			continue
		}
		t := time.NewTimer(s.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.stop:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
