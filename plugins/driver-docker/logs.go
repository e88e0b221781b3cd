package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/safefs"
)

// logSpec says where a task's container output goes: the files the client
// reads for `drover alloc logs`, with the same rotation as raw_exec's, and
// the checkpoint that lets a new driver process resume the copy without
// repeating what was written.
//
// The log files are in alloc/logs, which the task can write to (it is the
// container's /alloc/logs): every path is opened beneath AllocDir, the
// trusted root, without following a symlink (sdk/safefs), so a link a task
// planted in place of a log file is replaced, never written through.
type logSpec struct {
	// AllocDir is the allocation directory; a handle of an earlier driver
	// version lacks it, and the checkpoint's task dir's parent is used.
	AllocDir   string `json:"alloc_dir,omitempty"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	MaxFiles   int    `json:"max_files"`
	MaxSize    int64  `json:"max_size"`
	Checkpoint string `json:"checkpoint"`
}

// root opens the spec's trusted root.
func (s logSpec) root() (*safefs.Dir, error) {
	dir := s.AllocDir
	if dir == "" && s.Checkpoint != "" {
		dir = filepath.Dir(filepath.Dir(s.Checkpoint))
	}
	if dir == "" {
		return nil, errors.New("task logs: no allocation directory")
	}
	root, err := safefs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("task logs: %w", err)
	}
	return root, nil
}

// checkpointEvery paces checkpoint writes while output streams without a
// pause; whenever the copy has caught up with the engine the checkpoint is
// written at once. A driver killed between a write and its checkpoint
// repeats that output after recovery (at most checkpointEvery's worth),
// and never loses any.
const checkpointEvery = 250 * time.Millisecond

// maxCheckpointSize bounds the checkpoint file read back.
const maxCheckpointSize = 4096

// checkpoint is the timestamp (engine clock, ns) of the last log record
// copied; records at or before it are skipped when the copy resumes.
type checkpoint struct {
	Since int64 `json:"since_unix_nano"`
}

// readCheckpoint reads the checkpoint at path beneath root; a missing,
// unsafe or corrupt one is 0 (copy from the start).
func readCheckpoint(root *safefs.Dir, path string) int64 {
	rel, err := driver.RelBeneath(root.Name(), path)
	if err != nil {
		return 0
	}
	raw, err := root.ReadFile(rel, maxCheckpointSize)
	if err != nil {
		return 0
	}
	var c checkpoint
	if json.Unmarshal(raw, &c) != nil {
		return 0
	}
	return c.Since
}

// writeCheckpoint replaces the checkpoint at path beneath root atomically.
func writeCheckpoint(root *safefs.Dir, path string, since int64) error {
	rel, err := driver.RelBeneath(root.Name(), path)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(checkpoint{Since: since})
	return root.WriteFile(rel, raw, 0o644)
}

// openLog opens one stream's writer beneath root: rotated files <base>.<n>
// when rotation is set, else the file itself in append mode, else a
// discard.
func openLog(root *safefs.Dir, base string, maxFiles int, maxSize int64) (io.WriteCloser, error) {
	if base == "" {
		return nopCloser{io.Discard}, nil
	}
	rel, err := driver.RelBeneath(root.Name(), base)
	if err != nil {
		return nil, fmt.Errorf("open task log: %w", err)
	}
	if maxFiles > 0 {
		return driver.OpenRotatingLogIn(root, rel, maxFiles, maxSize)
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open task log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// copyLogs follows the container's output into the task's log files until
// the container's output ends (it exited) or ctx ends. It resumes after
// the checkpoint left by an earlier copy.
func copyLogs(ctx context.Context, eng *client.Client, containerID string, spec logSpec) error {
	root, err := spec.root()
	if err != nil {
		return err
	}
	defer root.Close()
	stdout, err := openLog(root, spec.Stdout, spec.MaxFiles, spec.MaxSize)
	if err != nil {
		return err
	}
	defer stdout.Close()
	stderr, err := openLog(root, spec.Stderr, spec.MaxFiles, spec.MaxSize)
	if err != nil {
		return err
	}
	defer stderr.Close()

	since := readCheckpoint(root, spec.Checkpoint)
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true}
	if since > 0 {
		opts.Since = fmt.Sprintf("%d.%09d", since/1e9, since%1e9)
	}
	rc, err := eng.ContainerLogs(ctx, containerID, opts)
	if err != nil {
		return fmt.Errorf("follow container logs: %w", err)
	}
	defer rc.Close()
	return copyStream(bufio.NewReaderSize(rc, 64<<10), since, stdout, stderr, func(last int64) {
		if spec.Checkpoint != "" {
			_ = writeCheckpoint(root, spec.Checkpoint, last)
		}
	})
}

// copyStream copies the records after since to their stream's writer and
// calls save with the newest record's timestamp whenever the copy has
// caught up with its input, at least every checkpointEvery, and at the end.
func copyStream(br *bufio.Reader, since int64, stdout, stderr io.Writer, save func(last int64)) error {
	last, saved := since, since
	lastSaved := time.Now()
	flush := func() {
		if last > saved {
			save(last)
			saved, lastSaved = last, time.Now()
		}
	}
	defer flush()
	return demux(br, func(stream byte, ts int64, msg []byte) {
		if ts != 0 && ts <= since {
			return // copied before the driver restarted
		}
		w := stdout
		if stream == 2 {
			w = stderr
		}
		_, _ = w.Write(msg)
		if ts > last {
			last = ts
		}
		if br.Buffered() == 0 || time.Since(lastSaved) >= checkpointEvery {
			flush()
		}
	})
}

// demux splits the engine's multiplexed log stream (an 8-byte header:
// stream type, 3 zero bytes, big-endian payload size) into records whose
// payload starts with an RFC 3339 timestamp and a space.
func demux(r io.Reader, emit func(stream byte, ts int64, msg []byte)) error {
	var hdr [8]byte
	buf := make([]byte, 32<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[4:]))
		if n > len(buf) {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return err
		}
		payload := buf[:n]
		var ts int64
		if i := bytes.IndexByte(payload, ' '); i > 0 {
			if t, err := time.Parse(time.RFC3339Nano, string(payload[:i])); err == nil {
				ts = t.UnixNano()
				payload = payload[i+1:]
			}
		}
		emit(hdr[0], ts, payload)
	}
}
