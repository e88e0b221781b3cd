package rawexec

import (
	"io"
	"os"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/safefs"
)

// rotator is the SDK's rotating log writer, which the supervisor writes
// its tasks' streams with.
type rotator = driver.RotatingLog

// openRotator opens the rotated log based at rel beneath root (the alloc
// dir), never following a link a task planted in alloc/logs.
func openRotator(root *safefs.Dir, rel string, maxFiles int, maxSize int64) (*rotator, error) {
	return driver.OpenRotatingLogIn(root, rel, maxFiles, maxSize)
}

// logDrainTimeout bounds how long the supervisor reads a stream after the task's
// process group is gone: only a process that left the group can still
// hold the pipe open, and it must not keep the exit from being recorded.
const logDrainTimeout = 2 * time.Second

// logPump copies a task's output pipe into its log.
type logPump struct {
	r    *os.File // the pipe's read end
	w    io.WriteCloser
	done chan struct{}
}

func startLogPump(r *os.File, w io.WriteCloser) *logPump {
	p := &logPump{r: r, w: w, done: make(chan struct{})}
	go p.run()
	return p
}

// run reads until the pipe closes. It keeps reading when the log cannot be
// written (a full disk): a task blocked on a full pipe would hang instead.
func (p *logPump) run() {
	defer close(p.done)
	buf := make([]byte, 32*1024)
	for {
		n, err := p.r.Read(buf)
		if n > 0 {
			_, _ = p.w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// finish waits for the pipe to drain, or cuts it off after timeout, then
// closes both ends.
func (p *logPump) finish(timeout time.Duration) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.r.SetReadDeadline(time.Now())
		<-p.done
	}
	_ = p.r.Close()
	_ = p.w.Close()
}
