package docker

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// An engine outage (the engine restarts, its socket goes away, a
// connection drops) does not end a task: the container keeps running in
// the engine. The watcher, the log copy and a pending stop retry with
// backoff until the engine answers again; only an outage longer than the
// plugin's engine_outage_timeout ends the task, with an error.
const (
	// engineBackoffMin is the first pause after the engine failed to
	// answer; each further failure doubles it up to engineBackoffMax.
	engineBackoffMin = 250 * time.Millisecond
	engineBackoffMax = 5 * time.Second
)

// backoff paces retries against an unreachable engine. The zero value
// starts at engineBackoffMin.
type backoff struct{ next time.Duration }

// wait sleeps the next pause, or returns false when ctx ends first.
func (b *backoff) wait(ctx context.Context) bool {
	d := b.next
	if d < engineBackoffMin {
		d = engineBackoffMin
	}
	b.next = min(2*d, engineBackoffMax)
	return sleepCtx(ctx, d)
}

func (b *backoff) reset() { b.next = 0 }

// engineUnreachable reports whether err says the engine could not be
// reached or the connection to it broke, as opposed to an answer.
func engineUnreachable(err error) bool {
	if err == nil {
		return false
	}
	if client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPIPE)
}

// removeLater removes a container whose removal failed because the engine
// did not answer, retrying with backoff until the engine answers or the
// driver shuts down. A StartTask of the same task that finds the container
// meanwhile removes it itself rather than adopting it (removalPending).
func (d *Driver) removeLater(containerID string) {
	d.mu.Lock()
	if _, ok := d.pendingRemovals[containerID]; ok {
		d.mu.Unlock()
		return
	}
	d.pendingRemovals[containerID] = struct{}{}
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer func() {
			d.mu.Lock()
			delete(d.pendingRemovals, containerID)
			d.mu.Unlock()
		}()
		var bo backoff
		for bo.wait(d.bg) {
			_, err := d.engine.ContainerRemove(d.bg, containerID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err == nil || cerrdefs.IsNotFound(err) {
				d.logger.Info("removed the container of a destroyed task after the engine answered again", "container_id", shortID(containerID))
				return
			}
			if !engineUnreachable(err) && d.bg.Err() == nil {
				d.logger.Warn("removing container failed", "container_id", shortID(containerID), "error", err)
				return
			}
		}
	}()
}

// removalPending reports whether removeLater still owes this container's
// removal.
func (d *Driver) removalPending(containerID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.pendingRemovals[containerID]
	return ok
}
