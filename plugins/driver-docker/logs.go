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
	"time"

	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
)

// logSpec says where a task's container output goes: the files the client
// reads for `drover alloc logs`, with the same rotation as raw_exec's, and
// the checkpoint that lets a new driver process resume the copy without
// repeating what was written.
type logSpec struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	MaxFiles   int    `json:"max_files"`
	MaxSize    int64  `json:"max_size"`
	Checkpoint string `json:"checkpoint"`
}

// checkpointEvery paces checkpoint writes while output streams without a
// pause; whenever the copy has caught up with the engine the checkpoint is
// written at once. A driver killed between a write and its checkpoint
// repeats that output after recovery (at most checkpointEvery's worth),
// and never loses any.
const checkpointEvery = 250 * time.Millisecond

// checkpoint is the timestamp (engine clock, ns) of the last log record
// copied; records at or before it are skipped when the copy resumes.
type checkpoint struct {
	Since int64 `json:"since_unix_nano"`
}

func readCheckpoint(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var c checkpoint
	if json.Unmarshal(raw, &c) != nil {
		return 0
	}
	return c.Since
}

func writeCheckpoint(path string, since int64) error {
	raw, _ := json.Marshal(checkpoint{Since: since})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// openLog opens one stream's writer: rotated files <base>.<n> when
// rotation is set, else the file itself in append mode, else a discard.
func openLog(base string, maxFiles int, maxSize int64) (io.WriteCloser, error) {
	switch {
	case base == "":
		return nopCloser{io.Discard}, nil
	case maxFiles > 0:
		return driver.OpenRotatingLog(base, maxFiles, maxSize)
	default:
		f, err := os.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open task log: %w", err)
		}
		return f, nil
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// copyLogs follows the container's output into the task's log files until
// the container's output ends (it exited) or ctx ends. It resumes after
// the checkpoint left by an earlier copy.
func copyLogs(ctx context.Context, eng *client.Client, containerID string, spec logSpec) error {
	stdout, err := openLog(spec.Stdout, spec.MaxFiles, spec.MaxSize)
	if err != nil {
		return err
	}
	defer stdout.Close()
	stderr, err := openLog(spec.Stderr, spec.MaxFiles, spec.MaxSize)
	if err != nil {
		return err
	}
	defer stderr.Close()

	since := readCheckpoint(spec.Checkpoint)
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
			_ = writeCheckpoint(spec.Checkpoint, last)
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
