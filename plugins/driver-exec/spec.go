package execdriver

// InitEnvVar, set in a process's environment, makes Serve run the task's
// init (init_linux.go) instead of the plugin: its value is the initSpec
// as JSON. The driver sets it in the command it has raw_exec's
// supervisor run; nothing else should.
const InitEnvVar = "DROVER_EXEC_INIT"

// stageEnvVar marks the second stage of the init, the one born in the
// task's namespaces.
const stageEnvVar = "DROVER_EXEC_INIT_STAGE"

// maxSpecSize bounds the spec (it travels in one environment variable,
// which the kernel caps at 128 KiB).
const maxSpecSize = 120 << 10

// initSpec is everything the task's init needs to build the task's root
// and run its command there.
type initSpec struct {
	// Root is the task directory, which becomes the task's /.
	Root string `json:"root"`
	// AllocShared is <alloc>/alloc, mounted at /alloc.
	AllocShared string `json:"alloc_shared,omitempty"`
	// Binds are the chroot_env entries: host Src (a directory or a
	// symlink) at Dst inside the root, read-only.
	Binds []bind `json:"binds"`

	Path    string   `json:"path"` // the command as configured
	Args    []string `json:"args"`
	Env     []string `json:"env"`
	WorkDir string   `json:"work_dir"`

	PIDHost     bool `json:"pid_host,omitempty"`
	IPCHost     bool `json:"ipc_host,omitempty"`
	NoPivotRoot bool `json:"no_pivot_root,omitempty"`

	// UID, GID and Groups are the task's user's.
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// Caps is the capability bounding set the command runs with.
	Caps []string `json:"caps"`
	// Mounts are the task's host volume mounts (TaskConfig.mounts),
	// bound last, so a destination beneath a chroot_env directory
	// (/etc/app) is not hidden by it.
	Mounts []volumeMount `json:"mounts,omitempty"`
	// ResolvConf is the allocation's resolv.conf (the group's dns block,
	// written by the client), bound read-only at the root's
	// /etc/resolv.conf.
	ResolvConf string `json:"resolv_conf,omitempty"`
	// Hostname, the group network's, is set in a UTS namespace of the
	// task's own.
	Hostname string `json:"hostname,omitempty"`
}

type bind struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

// chrootEnv is Nomad's default chroot_env: the host directories a task's
// root is populated from (read-only bind mounts here, where Nomad copies).
var chrootEnv = []bind{
	{"/bin", "/bin"},
	{"/etc", "/etc"},
	{"/lib", "/lib"},
	{"/lib32", "/lib32"},
	{"/lib64", "/lib64"},
	{"/run/resolvconf", "/run/resolvconf"},
	{"/sbin", "/sbin"},
	{"/usr", "/usr"},
}

// initResult is what the second stage reports to the first over a pipe.
type initResult struct {
	Code   int    `json:"code"`
	Signal int    `json:"signal,omitempty"`
	Err    string `json:"err,omitempty"`
}
