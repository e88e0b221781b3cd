package client

import (
	"context"
	"sync"

	"github.com/drover-org/drover/core/client/csi"
	"github.com/drover-org/drover/core/structs"
)

// The alloc runner's side of CSI volumes (package csi does the rest): the
// alloc dir the volume hook binds into, the wait for the volumes before
// any task starts, and the leader's node-detach ops routed to the alloc.

// csiAlloc is an alloc runner as the volume hook sees it.
type csiAlloc struct{ ar *allocRunner }

var _ csi.Alloc = csiAlloc{}

func (a csiAlloc) TaskPath(task, rel string) (string, error) {
	dirs, err := a.ar.dir.buildTask(task)
	if err != nil {
		return "", err
	}
	return containedPath(dirs.Dir, rel)
}

func (a csiAlloc) Persist() { a.ar.persist() }

// runVolumeSetup mounts the group's CSI volumes, cut short by a stop or
// destroy of the alloc; it reports whether tasks may go on (false also
// after a stop, whose kill the run loop handles).
func (ar *allocRunner) runVolumeSetup() (ok bool) {
	tg := ar.group()
	if !csi.HasVolumes(tg) {
		return true
	}
	ctx, cancel := context.WithCancel(ar.ctx)
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-ar.changed:
				ar.mu.Lock()
				stop := ar.stopReq
				ar.mu.Unlock()
				if stop {
					cancel()
				}
			}
		}
	}()
	err := ar.vols.Setup(ctx, ar.allocSnapshot(), tg)
	close(done)
	wg.Wait()
	ar.notify() // a wake-up the watcher took belongs to the run loop
	if err == nil {
		return true
	}
	ar.mu.Lock()
	stopped := ar.stopReq
	ar.mu.Unlock()
	if ar.ctx.Err() != nil || stopped {
		return false
	}
	ar.logger.Error("volume setup failed", "error", err)
	for _, tr := range ar.tasks {
		tr.failBeforeStart(evSetupFailure(err))
	}
	return false
}

// csiNodeDetach runs a node-detach op of the leader (`volume detach`) on
// the alloc it names: see csi.Volumes.NodeDetach. An alloc this client
// does not run has nothing mounted here.
func (c *Client) csiNodeDetach(ctx context.Context, op *structs.CSIControllerOp) error {
	if c.rcfg.Volumes == nil {
		return structs.NewError(structs.ErrUnavailable, "this client mounts no CSI volumes")
	}
	if op.AllocationID == "" || op.VolumeID == "" {
		return structs.NewError(structs.ErrInvalid, "node-detach names no allocation or volume")
	}
	c.mu.Lock()
	ar := c.runners[op.AllocationID]
	c.mu.Unlock()
	if ar == nil {
		return nil
	}
	return ar.vols.NodeDetach(ctx, op.Namespace, op.VolumeID)
}
