package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// A task of a group with its own network (bridge, none, cni/<name>)
// joins the allocation's network namespace, which the client made and
// set up. The engine cannot start a container in a namespace given by
// path, but it starts one in another container's (network_mode
// "container:<id>", the namespace of that container's main process), so,
// as Nomad does, each allocation gets a pause container, whose process
// first joins the allocation's namespace (nsenter, with CAP_SYS_ADMIN
// and the namespace bind-mounted read-only) and then sleeps. The pause
// container runs infra_image, which must hold nsenter and sleep (busybox
// does); it goes with the allocation's last task container.

const (
	// LabelNetns marks a pause container with the namespace it holds.
	LabelNetns = "com.drover.netns"
	// DefaultInfraImage is the pause containers' image when the plugin
	// config names none.
	DefaultInfraImage = "busybox:1.36"
	// pauseNetnsPath is where the namespace is mounted in the pause
	// container.
	pauseNetnsPath = "/drover/netns"
	// pauseJoinTimeout bounds the wait for the pause process to join.
	pauseJoinTimeout = 30 * time.Second
)

func pauseName(allocID string) string { return "drover-netns-" + allocID }

func (d *Driver) infraImage() string {
	if d.cfg != nil && d.cfg.InfraImage != "" {
		return d.cfg.InfraImage
	}
	return DefaultInfraImage
}

// joinNetwork points the task's container at the allocation's namespace
// (through its pause container, started here when it is not running) and
// drops the settings the engine refuses with a shared network: port
// publishing, which the client's port mappings do instead, and refuses
// those a user set that would be lost (network_mode, hostname, dns,
// extra_hosts). The group's hostname and dns block are the pause
// container's, which the task containers share.
func (d *Driver) joinNetwork(ctx context.Context, cfg *driverpb.TaskConfig, tc *TaskConfig, opts *client.ContainerCreateOptions) error {
	ni := cfg.GetNetworkIsolation()
	if ni == nil || ni.GetPath() == "" {
		return nil
	}
	for _, c := range []struct {
		set  bool
		name string
	}{{tc.NetworkMode != "", "network_mode"}, {tc.Hostname != "", "hostname"}, {len(tc.DNSServers) > 0, "dns_servers"}, {len(tc.ExtraHosts) > 0, "extra_hosts"}} {
		if c.set {
			return fmt.Errorf("%w: %s cannot be set on a task whose group has its own network (network block mode): the task shares the allocation's network namespace", driver.ErrInvalidConfig, c.name)
		}
	}
	if !strings.HasPrefix(ni.GetPath(), "/") {
		return fmt.Errorf("%w: network_isolation.path must be an absolute path, got %q", driver.ErrInvalidConfig, ni.GetPath())
	}
	d.netMu.Lock()
	defer d.netMu.Unlock()
	id, err := d.ensurePause(ctx, cfg.GetAllocId(), ni.GetPath(), pauseSettings{hostname: ni.GetHostname(), dns: cfg.GetDns()})
	if err != nil {
		return err
	}
	hc, cc := opts.HostConfig, opts.Config
	hc.NetworkMode = container.NetworkMode("container:" + id)
	if len(hc.PortBindings) > 0 {
		d.logger.Debug("task ports are mapped by the allocation's network, not published by the engine", "task_id", cfg.GetId())
	}
	hc.PortBindings, hc.PublishAllPorts, cc.ExposedPorts = nil, false, nil
	hc.DNS, hc.DNSOptions, hc.DNSSearch, hc.ExtraHosts = nil, nil, nil, nil
	cc.Hostname, cc.Domainname = "", ""
	return nil
}

// pauseSettings are what the allocation's tasks get from its pause
// container: the engine gives a container joining another's network that
// container's hostname and resolv.conf.
type pauseSettings struct {
	hostname string
	dns      *driverpb.DNSConfig
}

// config sets them on the pause container's create options.
func (p pauseSettings) config(cc *container.Config, hc *container.HostConfig) error {
	cc.Hostname = p.hostname
	if p.dns == nil {
		return nil
	}
	for i, s := range p.dns.GetServers() {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("%w: dns.servers[%d] %q is not an IP address", driver.ErrInvalidConfig, i, s)
		}
		hc.DNS = append(hc.DNS, a)
	}
	hc.DNSSearch, hc.DNSOptions = p.dns.GetSearches(), p.dns.GetOptions()
	return nil
}

// ensurePause returns the id of the allocation's running pause container
// holding netns, starting one when there is none. The group's hostname
// and dns block are set on it (they are the allocation's, fixed for its
// life).
func (d *Driver) ensurePause(ctx context.Context, allocID, netns string, set pauseSettings) (string, error) {
	want, err := nsInode(netns)
	if err != nil {
		return "", fmt.Errorf("%w: the allocation's network namespace %s: %v", driver.ErrInvalidConfig, netns, err)
	}
	name := pauseName(allocID)
	if insp, err := d.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err == nil {
		c := insp.Container
		if c.State != nil && c.State.Running && c.Config != nil && c.Config.Labels[LabelNetns] == netns {
			if got, err := nsInode(fmt.Sprintf("/proc/%d/ns/net", c.State.Pid)); err == nil && got == want {
				return c.ID, nil
			}
		}
		// Stopped, or holding another namespace: replace it.
		if _, err := d.engine.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("remove the allocation's stale pause container: %w", err)
		}
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect the allocation's pause container: %w", err)
	}
	image := d.infraImage()
	if _, err := d.ensureImage(ctx, &TaskConfig{Image: image}); err != nil {
		return "", fmt.Errorf("infra_image %q (the pause container that joins the allocation's network): %w", image, err)
	}
	cc := &container.Config{
		Image:      image,
		Entrypoint: []string{"nsenter", "--net=" + pauseNetnsPath, "--", "sleep", "2147483647"},
		Labels:     map[string]string{LabelAllocID: allocID, LabelNetns: netns},
	}
	hc := &container.HostConfig{
		NetworkMode: "none",
		Binds:       []string{netns + ":" + pauseNetnsPath + ":ro"},
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"SYS_ADMIN"},
		Init:        new(bool),
	}
	if err := set.config(cc, hc); err != nil {
		return "", err
	}
	created, err := d.engine.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cc, HostConfig: hc})
	if err != nil {
		return "", fmt.Errorf("create the allocation's pause container: %w", err)
	}
	id := created.ID
	fail := func(err error) (string, error) {
		d.removeContainer(id)
		return "", err
	}
	if _, err := d.engine.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fail(fmt.Errorf("start the allocation's pause container: %w", err))
	}
	deadline := time.Now().Add(pauseJoinTimeout)
	for {
		insp, err := d.engine.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fail(fmt.Errorf("inspect the allocation's pause container: %w", err))
		}
		st := insp.Container.State
		if st == nil || !st.Running {
			return fail(fmt.Errorf("the allocation's pause container (infra_image %q) exited (code %d) before joining the network: the image needs nsenter and sleep", image, exitCodeOf(st)))
		}
		if got, err := nsInode(fmt.Sprintf("/proc/%d/ns/net", st.Pid)); err == nil && got == want {
			d.logger.Info("pause container joined the allocation's network", "alloc_id", allocID, "container_id", shortID(id), "netns", netns)
			return id, nil
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("the allocation's pause container did not join its network within %s", pauseJoinTimeout))
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return fail(ctx.Err())
		}
	}
}

func exitCodeOf(st *container.State) int {
	if st == nil {
		return -1
	}
	return st.ExitCode
}

// leaveNetwork removes the allocation's pause container once no task
// container of the allocation is left.
func (d *Driver) leaveNetwork(ctx context.Context, allocID string) {
	if allocID == "" {
		return
	}
	d.netMu.Lock()
	defer d.netMu.Unlock()
	list, err := d.engine.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelAllocID+"="+allocID),
	})
	if err != nil {
		d.logger.Warn("list the allocation's containers", "alloc_id", allocID, "error", err)
		return
	}
	var pause string
	for _, c := range list.Items {
		if _, ok := c.Labels[LabelNetns]; ok {
			pause = c.ID
			continue
		}
		return // a task container remains
	}
	if pause == "" {
		return
	}
	if _, err := d.engine.ContainerRemove(ctx, pause, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		d.logger.Warn("remove the allocation's pause container", "alloc_id", allocID, "container_id", shortID(pause), "error", err)
		return
	}
	d.logger.Info("pause container removed with the allocation's last task", "alloc_id", allocID, "container_id", shortID(pause))
}

// nsInode identifies the namespace at path.
func nsInode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("no such namespace")
		}
		return 0, err
	}
	return st.Ino, nil
}
