// Package execdriver is the exec task driver, Nomad's isolated fork/exec
// driver: the task's command runs in mount, PID and IPC namespaces of its
// own, in a root built from its task directory and the host's
// chroot_env directories (/bin, /etc, /lib*, /usr, ... read-only), with
// its allocation's shared directory at /alloc and its local and secrets
// directories at /local and /secrets, as the task's user (nobody unless
// the task names one), with the capabilities Nomad allows, and in a
// cgroup of its own that carries its memory and cpu limits and through
// which its whole process tree is killed.
//
// The process plumbing is raw_exec's, reused rather than repeated: raw_exec
// runs each task under a supervisor that outlives the driver, in the
// task's cgroup, records its exit, and recovers it after a driver
// restart. The exec driver has raw_exec run, as root, this binary as the
// task's init (init_linux.go), which builds the namespaces and the root
// and runs the command in them.
package execdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"time"

	"github.com/hashicorp/go-hclog"

	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

const (
	// Name is the driver name jobspecs use (`driver = "exec"`).
	Name = "exec"
	// Version is this driver's version.
	Version = "0.1.0"
	// AttrDriver is the node attribute whose presence tells the scheduler
	// the driver is usable on the node.
	AttrDriver = "driver.exec"

	// defaultUser is the user of a task that names none, as Nomad's exec.
	defaultUser = "nobody"

	// defaultPath is searched for the command when the task env has no
	// PATH.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Driver is the exec driver. Call New.
type Driver struct {
	logger hclog.Logger
	cfg    *PluginConfig
	// raw runs the init: enabled, root allowed (the init needs it and
	// drops to the task's user itself), cgroups required.
	raw *rawexec.Driver

	// exe and args are how the init is started: this binary, with the
	// arguments that led here, so that the entry point (a standalone
	// binary, `drover __plugin driver-exec`, a test binary) reaches Serve.
	exe    string
	exeErr error
	args   []string

	// nsDir is where the namespace files are looked for (tests point it
	// elsewhere).
	nsDir string
}

var (
	_ driver.Driver          = (*Driver)(nil)
	_ driver.ConfigValidator = (*Driver)(nil)
)

// New returns an exec driver with cfg (nil: Nomad's defaults). A nil
// logger discards logs.
func New(logger hclog.Logger, cfg *PluginConfig) *Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg == nil {
		cfg, _ = ParsePluginConfig(nil)
	}
	logger = logger.Named(Name)
	exe, err := os.Executable()
	return &Driver{
		logger: logger,
		cfg:    cfg,
		raw:    rawexec.NewConfigured(logger, &rawexec.PluginConfig{Enabled: true, DeniedHostUsers: []string{}}),
		exe:    exe, exeErr: err,
		args:  append([]string(nil), os.Args[1:]...),
		nsDir: "/proc/self/ns",
	}
}

// Serve runs this process as the exec plugin, configured from
// ConfigEnvVar; as raw_exec's task supervisor when raw_exec started it as
// one; or as a task's init when the driver started it as one. Entry points
// must call it before anything else.
func Serve() {
	if os.Getenv(InitEnvVar) != "" {
		os.Exit(runInit())
	}
	if os.Getenv(rawexec.ShimEnvVar) != "" {
		rawexec.Serve() // runs the supervisor and exits
		return
	}
	logger := driver.NewLogger("")
	cfg, err := ParsePluginConfig([]byte(os.Getenv(ConfigEnvVar)))
	if err != nil {
		logger.Error("invalid plugin config", "error", err)
		os.Exit(1)
	}
	d := New(logger, cfg)
	d.logger.Info("exec configured", "default_pid_mode", cfg.DefaultPIDMode, "default_ipc_mode", cfg.DefaultIPCMode,
		"no_pivot_root", cfg.NoPivotRoot, "allow_caps", cfg.AllowCaps)
	driver.ServeWithLogger(d, logger)
}

// ValidateConfig implements driver.ConfigValidator.
func (d *Driver) ValidateConfig(_ context.Context, raw []byte) error {
	_, err := ParsePluginConfig(raw)
	return driver.InvalidPluginConfig(err)
}

// Info implements driver.Driver.
func (d *Driver) Info(context.Context) (*driverpb.InfoResponse, error) {
	return &driverpb.InfoResponse{Name: Name, Version: Version, FsIsolation: driver.FSIsolationChroot}, nil
}

// Fingerprint implements driver.Driver: undetected, with the reason, off
// Linux, when not root, or without mount, PID and IPC namespaces;
// unhealthy without a writable cgroup hierarchy.
func (d *Driver) Fingerprint(ctx context.Context) (*driverpb.FingerprintResponse, error) {
	if reason := d.unavailable(); reason != "" {
		return &driverpb.FingerprintResponse{HealthDescription: reason}, nil
	}
	fp, err := d.raw.Fingerprint(ctx)
	if err != nil {
		return nil, err
	}
	if !fp.GetHealthy() {
		return &driverpb.FingerprintResponse{Detected: true,
			HealthDescription: "exec runs every task in a cgroup of its own: " + fp.GetHealthDescription()}, nil
	}
	return &driverpb.FingerprintResponse{
		Detected: true, Healthy: true, HealthDescription: "Healthy",
		Attributes: map[string]string{AttrDriver: "1"},
	}, nil
}

// unavailable says why the driver cannot run tasks here ("": it can).
func (d *Driver) unavailable() string {
	switch {
	case runtime.GOOS != "linux":
		return fmt.Sprintf("exec is not supported on %s", runtime.GOOS)
	case os.Geteuid() != 0:
		return "exec needs the agent to run as root, to build the task's namespaces and root"
	case d.exeErr != nil:
		return fmt.Sprintf("cannot locate own executable for the task's init: %v", d.exeErr)
	}
	for _, ns := range []string{"mnt", "pid", "ipc"} {
		if _, err := os.Stat(filepath.Join(d.nsDir, ns)); err != nil {
			return fmt.Sprintf("exec needs %s namespaces, which this kernel does not offer: %v", ns, err)
		}
	}
	return ""
}

// StartTask implements driver.Driver.
func (d *Driver) StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error) {
	if reason := d.unavailable(); reason != "" {
		return nil, fmt.Errorf("%w: %s", driver.ErrInvalidConfig, reason)
	}
	spec, err := d.prepare(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if len(raw) > maxSpecSize {
		return nil, fmt.Errorf("%w: the task's environment and arguments take %d bytes, more than the %d the exec driver passes", driver.ErrInvalidConfig, len(raw), maxSpecSize)
	}
	initCfg, err := json.Marshal(rawexec.TaskConfig{Command: d.exe, Args: d.args})
	if err != nil {
		return nil, err
	}
	if err := shareTaskDirs(cfg, spec.UID, spec.GID); err != nil {
		return nil, err
	}
	rc := &driverpb.TaskConfig{
		Id: cfg.GetId(), AllocId: cfg.GetAllocId(), TaskName: cfg.GetTaskName(),
		ConfigJson: initCfg,
		Env:        map[string]string{InitEnvVar: string(raw)},
		AllocDir:   cfg.GetAllocDir(), TaskDir: cfg.GetTaskDir(),
		StdoutPath: cfg.GetStdoutPath(), StderrPath: cfg.GetStderrPath(),
		KillSignal: cfg.GetKillSignal(), Resources: cfg.GetResources(), LogRotation: cfg.GetLogRotation(),
		// raw_exec forks the init in the allocation's network namespace;
		// the task's own namespaces leave that one shared.
		NetworkIsolation: rawNetwork(cfg.GetNetworkIsolation()),
	}
	h, err := d.raw.StartTask(ctx, rc)
	if err != nil {
		return nil, err
	}
	d.logger.Info("task started", "task_id", cfg.GetId(), "command", spec.Path, "uid", spec.UID,
		"pid_mode", map[bool]string{true: modeHost, false: modePrivate}[spec.PIDHost])
	return h, nil
}

// prepare checks cfg and turns it into the init's spec, failing with
// ErrInvalidConfig before anything is started.
func (d *Driver) prepare(cfg *driverpb.TaskConfig) (*initSpec, error) {
	taskDir := cfg.GetTaskDir()
	if taskDir == "" || !filepath.IsAbs(taskDir) {
		return nil, fmt.Errorf("%w: task_dir must be an absolute path, got %q", driver.ErrInvalidConfig, taskDir)
	}
	if fi, err := os.Stat(taskDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: task_dir %q is not a directory", driver.ErrInvalidConfig, taskDir)
	}
	tc, err := parseTaskConfig(cfg.GetConfigJson(), d.cfg)
	if err != nil {
		return nil, err
	}
	caps, err := taskCaps(tc, d.cfg)
	if err != nil {
		return nil, err
	}
	name := cfg.GetUser()
	if name == "" {
		name = defaultUser
	}
	uid, gid, groups, err := lookupUser(name)
	if err != nil {
		return nil, err
	}
	spec := &initSpec{
		Root: filepath.Clean(taskDir), Binds: chrootEnv,
		Path: tc.Command, Args: tc.Args, Env: taskEnv(cfg.GetEnv()), WorkDir: tc.WorkDir,
		PIDHost: tc.PIDMode == modeHost, IPCHost: tc.IPCMode == modeHost, NoPivotRoot: d.cfg.NoPivotRoot,
		UID: uid, GID: gid, Groups: groups, Caps: caps,
	}
	if spec.WorkDir == "" {
		spec.WorkDir = "/"
	}
	if a := cfg.GetAllocDir(); a != "" {
		shared := filepath.Join(a, "alloc")
		if fi, err := os.Stat(shared); err == nil && fi.IsDir() {
			spec.AllocShared = shared
		}
	}
	if spec.Mounts, err = volumeMounts(cfg); err != nil {
		return nil, err
	}
	if ni := cfg.GetNetworkIsolation(); ni != nil {
		spec.Hostname = ni.GetHostname()
		if rc := cfg.GetResolvConfPath(); rc != "" {
			if !filepath.IsAbs(rc) {
				return nil, fmt.Errorf("%w: resolv_conf_path must be an absolute path, got %q", driver.ErrInvalidConfig, rc)
			}
			spec.ResolvConf = filepath.Clean(rc)
		}
	}
	if err := spec.checkCommand(); err != nil {
		return nil, err
	}
	return spec, nil
}

// taskEnv is the task env as the task sees it inside its root: the
// NOMAD_*_DIR variables name the root's paths.
func taskEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		switch k {
		case "NOMAD_ALLOC_DIR":
			v = "/alloc"
		case "NOMAD_TASK_DIR":
			v = "/local"
		case "NOMAD_SECRETS_DIR":
			v = "/secrets"
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// hostPath is where p, a path inside the task's root, is on the host.
func (s *initSpec) hostPath(p string) string {
	p = filepath.Clean(p)
	best := ""
	for _, b := range s.Binds {
		if (p == b.Dst || strings.HasPrefix(p, b.Dst+"/")) && len(b.Dst) > len(best) {
			best = b.Dst
		}
	}
	if best != "" {
		for _, b := range s.Binds {
			if b.Dst == best {
				return filepath.Join(b.Src, strings.TrimPrefix(p, best))
			}
		}
	}
	if s.AllocShared != "" && (p == "/alloc" || strings.HasPrefix(p, "/alloc/")) {
		return filepath.Join(s.AllocShared, strings.TrimPrefix(p, "/alloc"))
	}
	return filepath.Join(s.Root, p)
}

// checkCommand finds the command as the init will, on the host's view of
// the task's root, so a typo fails StartTask naming the command.
func (s *initSpec) checkCommand() error {
	if strings.Contains(s.Path, "/") {
		p := s.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.WorkDir, p)
		}
		if err := executable(s.hostPath(p)); err != nil {
			return fmt.Errorf("%w: command %q: %v", driver.ErrInvalidConfig, s.Path, err)
		}
		return nil
	}
	search := defaultPath
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, dir := range filepath.SplitList(search) {
		if dir == "" {
			continue
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.WorkDir, dir)
		}
		if executable(s.hostPath(filepath.Join(dir, s.Path))) == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: command %q not found in the task's PATH %q", driver.ErrInvalidConfig, s.Path, search)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

// lookupUser resolves the task's user on the host.
func lookupUser(name string) (uid, gid uint32, groups []uint32, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return 0, 0, nil, fmt.Errorf("%w: user %q: %v", driver.ErrInvalidConfig, name, err)
	}
	id, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, nil, fmt.Errorf("%w: user %q has a non-numeric uid/gid", driver.ErrInvalidConfig, name)
	}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if n, err := strconv.ParseUint(s, 10, 32); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	return uint32(id), uint32(g), groups, nil
}

// shareTaskDirs makes the directories the task writes its user's: its
// local/, secrets/ and tmp/, and the allocation's data/ and tmp/ shared
// (sticky and world-writable, like /tmp) among the group's tasks, which
// may run as different users. Nothing is followed: a link a task planted
// is refused, not chowned through.
func shareTaskDirs(cfg *driverpb.TaskConfig, uid, gid uint32) error {
	for _, name := range []string{"local", "secrets", "tmp"} {
		dir := filepath.Join(cfg.GetTaskDir(), name)
		if err := onDir(dir, func() error { return os.Lchown(dir, int(uid), int(gid)) }); err != nil {
			return err
		}
	}
	if cfg.GetAllocDir() == "" {
		return nil
	}
	for _, name := range []string{"data", "tmp"} {
		dir := filepath.Join(cfg.GetAllocDir(), "alloc", name)
		if err := onDir(dir, func() error { return os.Chmod(dir, 0o777|os.ModeSticky) }); err != nil {
			return err
		}
	}
	return nil
}

// onDir runs fn if dir exists and is a directory, not a link.
func onDir(dir string, fn func() error) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("task dir %s: not a directory (%v)", dir, err)
	}
	if err := fn(); err != nil {
		return fmt.Errorf("task dir %s: %w", dir, err)
	}
	return nil
}

// The rest of the lifecycle is raw_exec's, on the init: a signal to the
// init is passed on to the command, its exit is the command's, and the
// cgroup holds the whole tree.

// WaitTask implements driver.Driver.
func (d *Driver) WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error) {
	return d.raw.WaitTask(ctx, id)
}

// StopTask implements driver.Driver.
func (d *Driver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	return d.raw.StopTask(ctx, id, timeout, signal)
}

// DestroyTask implements driver.Driver.
func (d *Driver) DestroyTask(ctx context.Context, id string, force bool) error {
	return d.raw.DestroyTask(ctx, id, force)
}

// InspectTask implements driver.Driver.
func (d *Driver) InspectTask(ctx context.Context, id string) (*driverpb.TaskStatus, error) {
	return d.raw.InspectTask(ctx, id)
}

// SignalTask implements driver.Driver.
func (d *Driver) SignalTask(ctx context.Context, id string, signal string) error {
	return d.raw.SignalTask(ctx, id, signal)
}

// RecoverTask implements driver.Driver.
func (d *Driver) RecoverTask(ctx context.Context, h *driverpb.TaskHandle) error {
	return d.raw.RecoverTask(ctx, h)
}

// rawNetwork is the namespace raw_exec forks the init in: the path alone
// (the hostname is the init's to set, in the task's UTS namespace).
func rawNetwork(ni *driverpb.NetworkIsolation) *driverpb.NetworkIsolation {
	if ni == nil {
		return nil
	}
	return &driverpb.NetworkIsolation{Path: ni.GetPath(), Address: ni.GetAddress()}
}
