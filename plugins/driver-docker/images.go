package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
)

// imageRef counts the tracked tasks using an image; removal waits for
// gc.image_delay after the count drops to zero, and is cancelled by a
// task taking the image up again.
type imageRef struct {
	count int
	timer *time.Timer
	gen   int // bumped by every acquire, so a stale timer does nothing
}

// ensureImage returns the id of the task's image, pulling it when it is
// absent or force_pull is set. Credentials go to the engine only.
func (d *Driver) ensureImage(ctx context.Context, tc *TaskConfig) (string, error) {
	if !tc.ForcePull {
		insp, err := d.engine.ImageInspect(ctx, tc.Image)
		if err == nil {
			return insp.ID, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("inspect image %q: %w", tc.Image, err)
		}
	}
	opts, err := pullOptions(tc)
	if err != nil {
		return "", err
	}
	timeout := tc.pullTimeout()
	d.logger.Info("pulling image", "image", tc.Image, "force_pull", tc.ForcePull, "with_auth", len(tc.Auth) == 1, "timeout", timeout)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := d.engine.ImagePull(pctx, tc.Image, opts)
	if err == nil {
		err = resp.Wait(pctx)
	}
	if err != nil && tc.AuthSoftFail && opts.RegistryAuth != "" && pctx.Err() == nil {
		// auth_soft_fail: the credential may not be this image's
		// registry's; a public image pulls without it.
		d.logger.Warn("pull with the task's auth failed; auth_soft_fail set, pulling without it", "image", tc.Image, "error", err)
		opts.RegistryAuth = ""
		if resp, err = d.engine.ImagePull(pctx, tc.Image, opts); err == nil {
			err = resp.Wait(pctx)
		}
	}
	if err != nil {
		if pctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return "", fmt.Errorf("%w: failed to pull image %q: image_pull_timeout (%s) reached", ErrImagePull, tc.Image, timeout)
		}
		return "", fmt.Errorf("%w: failed to pull image %q: %v", ErrImagePull, tc.Image, err)
	}
	insp, err := d.engine.ImageInspect(ctx, tc.Image)
	if err != nil {
		return "", fmt.Errorf("%w: image %q is missing after its pull: %v", ErrImagePull, tc.Image, err)
	}
	return insp.ID, nil
}

// defaultImagePullTimeout is Nomad's image_pull_timeout.
const defaultImagePullTimeout = 5 * time.Minute

// pullTimeout is the task's image_pull_timeout (checked when the config
// was parsed), or the default.
func (tc *TaskConfig) pullTimeout() time.Duration {
	if d, err := time.ParseDuration(tc.ImagePullTimeout); err == nil && d > 0 {
		return d
	}
	return defaultImagePullTimeout
}

// pullOptions carries the task's registry credentials, if any, to the
// engine in the encoding its API takes.
func pullOptions(tc *TaskConfig) (client.ImagePullOptions, error) {
	var opts client.ImagePullOptions
	if len(tc.Auth) == 1 {
		a := tc.Auth[0]
		enc, err := authconfig.Encode(registry.AuthConfig{Username: a.Username, Password: a.Password, ServerAddress: a.ServerAddress})
		if err != nil {
			return opts, fmt.Errorf("encode registry auth: %w", err)
		}
		opts.RegistryAuth = enc
	}
	return opts, nil
}

// ErrImagePull is wrapped by StartTask's error when the image could not
// be pulled (unknown image, unreachable registry, refused credentials).
var ErrImagePull = errors.New("image pull failed")

func (d *Driver) acquireImage(id string) {
	if id == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.images[id]
	if r == nil {
		r = &imageRef{}
		d.images[id] = r
	}
	r.count++
	r.gen++
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

func (d *Driver) releaseImage(id string) {
	if id == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.images[id]
	if r == nil {
		return
	}
	r.count--
	if r.count > 0 {
		return
	}
	if !d.cfg.GC.gcImage() {
		delete(d.images, id)
		return
	}
	gen := r.gen
	r.timer = time.AfterFunc(d.cfg.GC.imageDelay, func() { d.removeImage(id, gen) })
}

// removeImage removes an image whose delay ran out, unless a task took it
// up again meanwhile (its generation moved on). The engine
// refuses to remove an image a container still uses, which protects
// containers drover does not track.
func (d *Driver) removeImage(id string, gen int) {
	d.mu.Lock()
	r := d.images[id]
	if r == nil || r.count > 0 || r.gen != gen || d.bg.Err() != nil {
		d.mu.Unlock()
		return
	}
	delete(d.images, id)
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(d.bg, time.Minute)
	defer cancel()
	if _, err := d.engine.ImageRemove(ctx, id, client.ImageRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		d.logger.Info("image kept", "image_id", shortID(id), "reason", err.Error())
		return
	}
	d.logger.Info("image removed", "image_id", shortID(id))
}

func removeFile(path string) error {
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
