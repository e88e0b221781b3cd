package rawexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

const (
	// exitFileName is where the supervisor records the exit result, in the
	// task directory: it must outlive both the supervisor and the driver.
	exitFileName = ".drover-exit.json"

	// defaultPath is searched for the command when the task env has no PATH.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

	// shimStartTimeout bounds how long the supervisor may take to report
	// that the command started; it only guards against a wedged one.
	shimStartTimeout = 30 * time.Second
)

// TaskConfig is raw_exec's schema for the jobspec task `config` block.
type TaskConfig struct {
	// Command to run: an absolute path, a path relative to the task
	// directory, or a name looked up in the task env's PATH.
	Command string `json:"command"`
	// Args follow the command, uninterpreted by any shell.
	Args []string `json:"args"`
}

// parseTaskConfig decodes config_json strictly: a misspelt key is an error
// the user should see, not a silently ignored setting.
func parseTaskConfig(raw []byte) (*TaskConfig, error) {
	var cfg TaskConfig
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("%w: config: command is required", driver.ErrInvalidConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%w: config: %v", driver.ErrInvalidConfig, err)
	}
	if cfg.Command == "" {
		return nil, fmt.Errorf("%w: config: command is required", driver.ErrInvalidConfig)
	}
	return &cfg, nil
}

// resolveCommand finds the executable the task will run, before anything is
// spawned, so that a typo fails StartTask with the command's name instead of
// a task that dies at once.
func resolveCommand(command, taskDir string, env map[string]string) (string, error) {
	if strings.Contains(command, "/") {
		path := command
		if !filepath.IsAbs(path) {
			path = filepath.Join(taskDir, path)
		}
		if err := checkExecutable(path); err != nil {
			return "", fmt.Errorf("%w: command %q: %v", driver.ErrInvalidConfig, command, err)
		}
		return path, nil
	}
	searchPath, ok := env["PATH"]
	if !ok {
		searchPath = defaultPath
	}
	for _, dir := range filepath.SplitList(searchPath) {
		if dir == "" {
			continue
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(taskDir, dir)
		}
		path := filepath.Join(dir, command)
		if checkExecutable(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: command %q not found in PATH %q", driver.ErrInvalidConfig, command, searchPath)
}

func checkExecutable(path string) error {
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

// resolveUser returns the credential to run the task as, or nil to run it
// as the driver's own user. The task's user (the driver's own when the
// task names none) must not be on denied_host_users: a task running as
// root reads every other task's environment and the node's credentials.
func (d *Driver) resolveUser(name string) (*shimCredential, error) {
	var u *user.User
	var err error
	if name == "" {
		u, err = user.LookupId(strconv.Itoa(os.Getuid()))
		if err != nil {
			u = &user.User{Uid: strconv.Itoa(os.Getuid()), Username: strconv.Itoa(os.Getuid())}
		}
	} else if u, err = user.Lookup(name); err != nil {
		return nil, fmt.Errorf("%w: user %q: %v", driver.ErrInvalidConfig, name, err)
	}
	if d.userDenied(u) {
		who := fmt.Sprintf("user %q", u.Username)
		if name == "" {
			who = fmt.Sprintf("the task sets no user, so it would run as the driver's user %q, which", u.Username)
		}
		return nil, fmt.Errorf("%w: %s is denied by the raw_exec plugin config %s %q; set the task's user to another account, or change %s in the agent's plugin \"raw_exec\" stanza",
			driver.ErrInvalidConfig, who, ConfigKeyDeniedHostUsers, d.cfg.DeniedHostUsers, ConfigKeyDeniedHostUsers)
	}
	if name == "" {
		return nil, nil
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: user %q has a non-numeric uid/gid", driver.ErrInvalidConfig, name)
	}
	if int(uid) == os.Getuid() {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: running tasks as user %q needs the driver to run as root", driver.ErrInvalidConfig, name)
	}
	cred := &shimCredential{UID: uint32(uid), GID: uint32(gid)}
	groups, err := u.GroupIds()
	if err == nil {
		for _, g := range groups {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
	}
	return cred, nil
}

// userDenied reports whether u is on denied_host_users, by name or uid (an
// entry naming a user resolves to its uid, so "root" also denies any other
// name for uid 0).
func (d *Driver) userDenied(u *user.User) bool {
	for _, e := range d.cfg.DeniedHostUsers {
		if e == u.Username || e == u.Uid {
			return true
		}
		if du, err := user.Lookup(e); err == nil && du.Uid == u.Uid {
			return true
		}
	}
	return false
}

// StartTask implements driver.Driver.
func (d *Driver) StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error) {
	if !d.cfg.Enabled {
		return nil, fmt.Errorf("%w: raw_exec is %s", driver.ErrInvalidConfig, DisabledDescription)
	}
	spec, killSignal, err := d.prepare(cfg)
	if err != nil {
		return nil, err
	}
	tracked, release, err := d.reserve(cfg.GetId())
	if err != nil {
		return nil, err
	}
	if tracked {
		return nil, fmt.Errorf("%w: %q", driver.ErrTaskExists, cfg.GetId())
	}
	defer release()

	// A result left by an earlier run in the same task directory is
	// removed by the supervisor, under the task directory's lock.
	cgHost, err := d.cgroups()
	if err != nil {
		return nil, fmt.Errorf("task %q: %w", cfg.GetId(), err)
	}
	if cgHost == nil && !d.cfg.NoCgroups {
		d.logger.Warn("no writable cgroup hierarchy: the task runs without resource limits, and processes that leave its process group survive it",
			"task_id", cfg.GetId())
	}
	if cgHost != nil {
		res := cfg.GetResources()
		spec.Cgroup, err = cgHost.create(cfg.GetId(), cgroupResources{
			CPUMHz: res.GetCpu(), MemoryMB: res.GetMemoryMb(), MemoryMaxMB: res.GetMemoryMaxMb(),
		})
		if err != nil {
			return nil, fmt.Errorf("task %q: %w", cfg.GetId(), err)
		}
	}
	if spec.Credential != nil {
		if err := shareTaskDirs(cfg, spec.Credential); err != nil {
			d.destroyCgroup(cfg.GetId(), spec.Cgroup)
			return nil, err
		}
	}
	sup, call, started, abandoned, err := d.launch(ctx, spec)
	if err != nil {
		if !abandoned {
			// An abandoned start's cgroup is the supervisor's link's to
			// clean: the supervisor may be joining it right now.
			d.destroyCgroup(cfg.GetId(), spec.Cgroup)
		}
		return nil, err
	}
	startedAt := time.Now()
	st := handleState{
		Version:        stateVersion,
		ShimPID:        sup.pid,
		ShimStartTicks: sup.startTicks,
		TaskPID:        started.PID,
		TaskStartTicks: started.StartTicks,
		BootID:         bootID(),
		ExitFile:       spec.ExitFile,
		KillSignal:     killSignal,
		Cgroup:         spec.Cgroup,
		TaskLock:       true,
	}
	t := newTask(cfg.GetId(), st, startedAt)
	handle, err := t.handle()
	if err != nil {
		// Unreachable in practice (the state is plain data); do not leave
		// an untracked task running. The supervisor removes its cgroup.
		_ = syscall.Kill(-started.PID, syscall.SIGKILL)
		return nil, err
	}
	d.track(t, func() { d.watchSupervised(t, sup, call) })
	d.logger.Info("task started", "task_id", t.id, "pid", started.PID, "supervisor_pid", st.ShimPID,
		"command", spec.Path, "cgroup", spec.Cgroup.procsDirOrEmpty())
	return handle, nil
}

// prepare validates cfg and turns it into the supervisor's spec, failing with
// ErrInvalidConfig before anything is spawned.
func (d *Driver) prepare(cfg *driverpb.TaskConfig) (*shimSpec, string, error) {
	if cfg.GetId() == "" {
		return nil, "", fmt.Errorf("%w: task id is required", driver.ErrInvalidConfig)
	}
	if d.shimExeErr != nil {
		return nil, "", fmt.Errorf("locate own executable for the task supervisor: %w", d.shimExeErr)
	}
	taskDir := cfg.GetTaskDir()
	if taskDir == "" || !filepath.IsAbs(taskDir) {
		return nil, "", fmt.Errorf("%w: task_dir must be an absolute path, got %q", driver.ErrInvalidConfig, taskDir)
	}
	if fi, err := os.Stat(taskDir); err != nil || !fi.IsDir() {
		return nil, "", fmt.Errorf("%w: task_dir %q is not a directory", driver.ErrInvalidConfig, taskDir)
	}
	tc, err := parseTaskConfig(cfg.GetConfigJson())
	if err != nil {
		return nil, "", err
	}
	path, err := resolveCommand(tc.Command, taskDir, cfg.GetEnv())
	if err != nil {
		return nil, "", err
	}
	killSignal := cfg.GetKillSignal()
	if killSignal == "" {
		killSignal = driver.DefaultKillSignal
	}
	if _, err := driver.ParseSignal(killSignal); err != nil {
		return nil, "", fmt.Errorf("%w: kill_signal: %v", driver.ErrInvalidConfig, err)
	}
	cred, err := d.resolveUser(cfg.GetUser())
	if err != nil {
		return nil, "", err
	}
	var maxFiles int
	var maxSize int64
	if lr := cfg.GetLogRotation(); lr != nil {
		if lr.GetMaxFiles() < 1 {
			return nil, "", fmt.Errorf("%w: log_rotation.max_files must be at least 1, got %d", driver.ErrInvalidConfig, lr.GetMaxFiles())
		}
		if lr.GetMaxFileSizeBytes() < 1 {
			return nil, "", fmt.Errorf("%w: log_rotation.max_file_size_bytes must be at least 1, got %d", driver.ErrInvalidConfig, lr.GetMaxFileSizeBytes())
		}
		maxFiles, maxSize = int(lr.GetMaxFiles()), lr.GetMaxFileSizeBytes()
	}
	netns := cfg.GetNetworkIsolation().GetPath()
	if netns != "" && !filepath.IsAbs(netns) {
		return nil, "", fmt.Errorf("%w: network_isolation.path must be an absolute path, got %q", driver.ErrInvalidConfig, netns)
	}
	if h := cfg.GetNetworkIsolation().GetHostname(); h != "" {
		return nil, "", fmt.Errorf("%w: the group network's hostname %q cannot be given to a raw_exec task, which shares the node's UTS namespace (use the exec or docker driver, or drop hostname)", driver.ErrInvalidConfig, h)
	}
	return &shimSpec{
		NetNS:          netns,
		LogMaxFiles:    maxFiles,
		LogMaxFileSize: maxSize,
		Path:           path,
		Argv:           append([]string{tc.Command}, tc.Args...),
		Env:            envList(cfg.GetEnv()),
		Dir:            taskDir,
		Stdout:         cfg.GetStdoutPath(),
		Stderr:         cfg.GetStderrPath(),
		ExitFile:       filepath.Join(taskDir, exitFileName),
		Credential:     cred,
	}, killSignal, nil
}
