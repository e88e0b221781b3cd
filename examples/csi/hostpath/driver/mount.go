package hostpath

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// errUnsupported is returned by the mount helpers on systems without Linux
// bind mounts.
var errUnsupported = errors.New("bind mounts need Linux")

// mountEntry is one line of /proc/self/mountinfo, reduced to what the driver
// reads: which directory of its file system a mount shows (Root), where
// (MountPoint), and the per-mount options (e.g. "ro").
type mountEntry struct {
	Root       string
	MountPoint string
	Options    []string
}

// readOnly reports whether the mount itself is read-only.
func (m mountEntry) readOnly() bool {
	for _, o := range m.Options {
		if o == "ro" {
			return true
		}
	}
	return false
}

// volumeID tells which hostpath volume a bind mount shows, or "" when it is
// not one. A bind of <state>/volumes/<id>, and a bind of that bind, carry the
// volume's directory as their root.
func (m mountEntry) volumeID() string {
	if filepath.Base(filepath.Dir(m.Root)) != volumesDirName {
		return ""
	}
	id := filepath.Base(m.Root)
	if validID(id) != nil {
		return ""
	}
	return id
}

var mountInfoPath = "/proc/self/mountinfo"

// readMountInfo parses the mount table. Its format is documented in
// proc(5): "id parent major:minor root mountpoint options [optional...] -
// fstype source superoptions", with spaces and the like escaped as \ooo.
func readMountInfo() ([]mountEntry, error) {
	b, err := os.ReadFile(mountInfoPath)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return parseMountInfo(bytes.NewReader(b))
}

func parseMountInfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			return nil, fmt.Errorf("malformed mountinfo line %q", sc.Text())
		}
		out = append(out, mountEntry{
			Root:       unescapeOctal(f[3]),
			MountPoint: unescapeOctal(f[4]),
			Options:    strings.Split(f[5], ","),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \ooo escapes of space, tab, newline and
// backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// canonical resolves symlinks in an existing path so it compares equal to the
// kernel's mount points; a missing path is only cleaned.
func canonical(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return filepath.Clean(path)
}

// mountAt returns the topmost mount at path, if any.
func mountAt(path string) (mountEntry, bool, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return mountEntry{}, false, err
	}
	path = canonical(path)
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].MountPoint == path {
			return mounts[i], true, nil
		}
	}
	return mountEntry{}, false, nil
}

// volumeMounts lists where a volume is mounted on this host.
func volumeMounts(id string) ([]string, error) {
	mounts, err := readMountInfo()
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no /proc: nothing can be mounted by this driver either
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.volumeID() == id {
			out = append(out, m.MountPoint)
		}
	}
	return out, nil
}

// fsUsage is what statfs tells of a file system.
type fsUsage struct {
	totalBytes, availableBytes, usedBytes int64
	totalInodes, freeInodes, usedInodes   int64
}
