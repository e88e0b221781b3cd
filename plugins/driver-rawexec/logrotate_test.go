package rawexec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// logFiles returns the numbered files of the stream at base, by number.
func logFiles(t *testing.T, base string) map[int][]byte {
	t.Helper()
	matches, err := filepath.Glob(base + ".*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]byte{}
	for _, m := range matches {
		n, err := strconv.Atoi(strings.TrimPrefix(m, base+"."))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// checkRotated asserts the stream at base is exactly maxFiles consecutive
// files, none over maxSize, that read in order as the end of want, and
// that the last byte of want is in the newest file.
func checkRotated(t *testing.T, base string, want []byte, maxFiles int, maxSize int64) {
	t.Helper()
	files := logFiles(t, base)
	if len(files) != maxFiles {
		t.Fatalf("%d log files %v; want exactly %d", len(files), keys(files), maxFiles)
	}
	newest := -1
	for n := range files {
		newest = max(newest, n)
	}
	var got []byte
	for n := newest - maxFiles + 1; n <= newest; n++ {
		b, ok := files[n]
		if !ok {
			t.Fatalf("log files %v are not consecutive", keys(files))
		}
		if int64(len(b)) > maxSize {
			t.Fatalf("%s.%d has %d bytes; max_file_size is %d", base, n, len(b), maxSize)
		}
		got = append(got, b...)
	}
	if !bytes.HasSuffix(want, got) {
		t.Fatalf("the kept log (%d bytes, ending %q) is not the end of the output (%d bytes, ending %q)",
			len(got), tail(got), len(want), tail(want))
	}
	// Every file but the newest is full, so the kept log is as long as it
	// can be.
	if min := int64(maxFiles-1)*maxSize + 1; int64(len(got)) < min && int64(len(want)) >= min {
		t.Fatalf("kept %d bytes of %d; want at least %d", len(got), len(want), min)
	}
}

func keys(m map[int][]byte) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

func tail(b []byte) []byte { return b[max(0, len(b)-20):] }

func TestRotatorKeepsNewestFiles(t *testing.T) {
	base := filepath.Join(t.TempDir(), "web.stdout")
	r, err := driver.OpenRotatingLog(base, 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	// Writes of assorted sizes, some larger than a whole file.
	for i := 0; i < 200; i++ {
		chunk := []byte(strings.Repeat(fmt.Sprintf("<%d>", i), i%40+1))
		if n, err := r.Write(chunk); err != nil || n != len(chunk) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		all = append(all, chunk...)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkRotated(t, base, all, 3, 100)
}

func TestRotatorResumesAtNewestFile(t *testing.T) {
	base := filepath.Join(t.TempDir(), "web.stdout")
	write := func(s string) {
		t.Helper()
		r, err := driver.OpenRotatingLog(base, 2, 10)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("0123456789abc") // .0 full, .1 "abc"
	write("defg")          // a restarted task appends to .1
	files := logFiles(t, base)
	if string(files[0]) != "0123456789" || string(files[1]) != "abcdefg" || len(files) != 2 {
		t.Fatalf("files = %v", strFiles(files))
	}
	write("hijklmn") // .1 fills up, .2 begins and .0 goes
	files = logFiles(t, base)
	if _, ok := files[0]; ok || string(files[1]) != "abcdefghij" || string(files[2]) != "klmn" {
		t.Fatalf("files = %v", strFiles(files))
	}
	if _, err := driver.OpenRotatingLog(base, 0, 10); err == nil {
		t.Fatal("OpenRotatingLog accepted max_files 0")
	}
}

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

// TestTaskLogsAreRotated runs a task that prints more than
// max_files × max_file_size bytes to each stream.
func TestTaskLogsAreRotated(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/chatty", "/bin/sh", "-c", "seq 1 5000; seq 1 4000 >&2")
	cfg.StdoutPath = filepath.Join(cfg.GetTaskDir(), "chatty.stdout")
	cfg.StderrPath = filepath.Join(cfg.GetTaskDir(), "chatty.stderr")
	cfg.LogRotation = &driverpb.LogRotation{MaxFiles: 3, MaxFileSizeBytes: 1024}
	start(t, d, cfg)
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
	checkRotated(t, cfg.GetStdoutPath(), seqOutput(5000), 3, 1024)
	checkRotated(t, cfg.GetStderrPath(), seqOutput(4000), 3, 1024)
}

// TestLogRotationOutlivesDriver: the shim writes the logs, so rotation
// goes on while no driver process exists and after a new one recovered
// the task.
func TestLogRotationOutlivesDriver(t *testing.T) {
	ctx := testCtx(t)
	first := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/orphaned-logs", "/bin/sh", "-c", "seq 1 100; read x < gate; seq 101 3000")
	gate := mkfifo(t, cfg.GetTaskDir(), "gate")
	cfg.StdoutPath = filepath.Join(cfg.GetTaskDir(), "task.stdout")
	cfg.LogRotation = &driverpb.LogRotation{MaxFiles: 2, MaxFileSizeBytes: 1000}
	h := start(t, first, cfg)
	waitForOutput(t, cfg.GetStdoutPath()+".0", string(seqOutput(100)))

	second := newTestDriver()
	if err := second.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.DestroyTask(ctx, h.GetId(), true) })
	openGate(t, gate)
	if res := awaitExit(t, second, h.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
	checkRotated(t, cfg.GetStdoutPath(), seqOutput(3000), 2, 1000)
}

func strFiles(m map[int][]byte) map[int]string {
	out := map[int]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// A task that plants its next log files as symlinks to a host file, then
// prints more than max_file_size, does not get the host file written: the
// shim's rotation replaces each link with a log file.
func TestTaskLogRotationIgnoresPlantedLinks(t *testing.T) {
	d := newTestDriver()
	host := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(host, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(host, old, old); err != nil {
		t.Fatal(err)
	}
	cfg := newTaskConfig(t, "alloc-1/planter", "/bin/sh", "-c",
		`for i in 1 2 3 4; do ln -sf "$0" chatty.stdout.$i; done; seq 1 3000`, host)
	cfg.StdoutPath = filepath.Join(cfg.GetTaskDir(), "chatty.stdout")
	cfg.LogRotation = &driverpb.LogRotation{MaxFiles: 10, MaxFileSizeBytes: 1024}
	start(t, d, cfg)
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
	b, err := os.ReadFile(host)
	fi, serr := os.Stat(host)
	if err != nil || serr != nil || string(b) != "host secret" || !fi.ModTime().Equal(old) {
		t.Fatalf("host file written through the task's links: %q (%v), mtime %v (%v)", tail(b), err, fi.ModTime(), serr)
	}
	checkRotated(t, cfg.GetStdoutPath(), seqOutput(3000), 10, 1024)
}

// The exit file is read and written without following a link planted in
// its place: a link to a host file is neither read nor written through.
func TestExitFileIgnoresPlantedLink(t *testing.T) {
	alloc := t.TempDir()
	taskDir := filepath.Join(alloc, "web")
	if err := os.MkdirAll(taskDir, 0o755); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(host, []byte(`{"exit_code": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(taskDir, exitFileName)
	if err := os.Symlink(host, path); err != nil {
		t.Fatal(err)
	}
	if rec, err := readExitFile(path); rec != nil || err == nil {
		t.Errorf("exit file read through a link: %+v, %v", rec, err)
	}
	if err := writeExitFile(path, &exitRecord{ExitCode: 7}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(host); string(b) != `{"exit_code": 3}` {
		t.Errorf("host file written through the exit file's link: %q", b)
	}
	if rec, err := readExitFile(path); err != nil || rec == nil || rec.ExitCode != 7 {
		t.Errorf("exit file = %+v, %v", rec, err)
	}
}
