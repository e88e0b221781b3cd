package docker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// everyNomadField is a docker task config with every key Nomad's docker
// driver documents (1.6), as the jobspec encodes it.
const everyNomadField = `{
  "image": "redis:7", "args": ["--port", "6379"], "command": "redis-server",
  "auth": {"username": "u", "password": "p", "email": "u@example.com", "server_address": "registry.example"},
  "auth_soft_fail": true, "force_pull": false, "image_pull_timeout": "5m",
  "cap_add": ["chown"], "cap_drop": ["net_raw"], "cpuset_cpus": "0", "cpu_hard_limit": true, "cpu_cfs_period": 100000,
  "devices": [{"host_path": "/dev/null", "container_path": "/dev/xnull", "cgroup_permissions": "rw"}],
  "dns_search_domains": ["example.com"], "dns_options": ["ndots:2"], "dns_servers": ["10.0.0.2"],
  "entrypoint": ["/bin/sh", "-c"], "extra_hosts": ["db:10.0.0.5"], "healthchecks": {"disable": true},
  "hostname": "cache", "init": true, "interactive": true, "isolation": "default", "ipc_mode": "private",
  "ipv4_address": "", "ipv6_address": "", "labels": {"team": "cache"}, "load": "",
  "logging": {"type": "json-file", "config": [{"max-size": "10m"}]}, "mac_address": "",
  "memory_hard_limit": 512, "mount": [
    {"type": "bind", "source": "local", "target": "/cfg", "readonly": true, "bind_options": {"propagation": "rprivate"}},
    {"type": "volume", "source": "data", "target": "/data", "volume_options": {"no_copy": true, "labels": {"a": "b"}, "driver_config": {"name": "local", "options": {"o": "bind"}}}},
    {"type": "tmpfs", "target": "/scratch", "tmpfs_options": {"size": 1048576, "mode": 448}}],
  "mounts": [{"type": "tmpfs", "target": "/legacy"}],
  "network_aliases": [], "network_mode": "bridge", "pid_mode": "", "pids_limit": 64, "oom_score_adj": 100,
  "port_map": [{"db": 6379}], "ports": ["db"], "privileged": false, "readonly_rootfs": true, "runtime": "runc",
  "security_opt": ["no-new-privileges"], "shm_size": 67108864, "storage_opt": {}, "sysctl": {"net.core.somaxconn": "1024"},
  "tty": false, "ulimit": {"nofile": "1024:2048", "nproc": "512"}, "uts_mode": "", "userns_mode": "",
  "volume_driver": "", "volumes": ["local/x:/x"], "work_dir": "/data", "group_add": ["users"], "cgroupns": "private"
}`

// TestEveryNomadFieldAccepted: every documented key parses and lands in
// the engine's create request where the engine API carries it.
func TestEveryNomadFieldAccepted(t *testing.T) {
	pc, err := ParsePluginConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := parseTaskConfig([]byte(everyNomadField), pc)
	if err != nil {
		t.Fatalf("parseTaskConfig: %v", err)
	}
	alloc := t.TempDir()
	taskDir := filepath.Join(alloc, "redis")
	if err := os.MkdirAll(filepath.Join(taskDir, "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := &driverpb.TaskConfig{Id: "a1/redis", AllocId: "a1", TaskName: "redis", AllocDir: alloc, TaskDir: taskDir,
		Resources: &driverpb.Resources{Cpu: 500, MemoryMb: 256},
		Ports:     []*driverpb.PortMapping{{Label: "db", Value: 23456, To: 6379}}}
	opts, err := createOptions(cfg, tc, pc)
	if err != nil {
		t.Fatalf("createOptions: %v", err)
	}
	cc, hc := opts.Config, opts.HostConfig
	if hc.Init == nil || !*hc.Init || !cc.OpenStdin || hc.ShmSize != 64<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 64 ||
		hc.OomScoreAdj != 100 || !hc.ReadonlyRootfs || hc.Runtime != "runc" || hc.CpusetCpus != "0" || hc.CPUPeriod != 100000 {
		t.Errorf("scalars: %+v", hc)
	}
	if hc.Memory != 512<<20 || hc.MemoryReservation != 256<<20 {
		t.Errorf("memory_hard_limit: memory %d reservation %d", hc.Memory, hc.MemoryReservation)
	}
	if !slices.Equal(hc.DNSSearch, []string{"example.com"}) || !slices.Equal(hc.DNSOptions, []string{"ndots:2"}) ||
		!slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || !slices.Equal(hc.GroupAdd, []string{"users"}) ||
		hc.Sysctls["net.core.somaxconn"] != "1024" || hc.CgroupnsMode != container.CgroupnsMode("private") {
		t.Errorf("lists: %+v", hc)
	}
	if len(hc.Ulimits) != 2 || hc.Ulimits[0].Name != "nofile" || hc.Ulimits[0].Soft != 1024 || hc.Ulimits[0].Hard != 2048 ||
		hc.Ulimits[1].Soft != 512 || hc.Ulimits[1].Hard != 512 {
		t.Errorf("ulimits: %+v %+v", hc.Ulimits[0], hc.Ulimits)
	}
	if len(hc.Devices) != 1 || hc.Devices[0].PathInContainer != "/dev/xnull" || hc.Devices[0].CgroupPermissions != "rw" {
		t.Errorf("devices: %+v", hc.Devices)
	}
	if cc.Healthcheck == nil || !slices.Equal(cc.Healthcheck.Test, []string{"NONE"}) {
		t.Errorf("healthchecks.disable: %+v", cc.Healthcheck)
	}
	if hc.LogConfig.Type != "json-file" || hc.LogConfig.Config["max-size"] != "10m" {
		t.Errorf("logging: %+v", hc.LogConfig)
	}
	if len(hc.Mounts) != 3 || hc.Mounts[0].Type != mount.TypeVolume || hc.Mounts[0].VolumeOptions == nil || !hc.Mounts[0].VolumeOptions.NoCopy ||
		hc.Mounts[0].VolumeOptions.DriverConfig.Options["o"] != "bind" || hc.Mounts[1].Type != mount.TypeTmpfs ||
		hc.Mounts[1].TmpfsOptions.SizeBytes != 1<<20 || hc.Mounts[1].TmpfsOptions.Mode != 0o700 || hc.Mounts[2].Target != "/legacy" {
		t.Errorf("mounts: %+v", hc.Mounts)
	}
	if !slices.ContainsFunc(hc.Binds, func(b string) bool { return strings.HasSuffix(b, ":/cfg:ro,rprivate") }) {
		t.Errorf("bind with propagation: %v", hc.Binds)
	}
	var bound []string
	for p, b := range hc.PortBindings {
		bound = append(bound, p.String()+"="+b[0].HostPort)
	}
	slices.Sort(bound)
	if !slices.Equal(bound, []string{"6379/tcp=23456", "6379/udp=23456"}) {
		t.Errorf("port_map/ports: %v", bound)
	}
	var warned []string
	for _, w := range unsupported(tc) {
		warned = append(warned, w.field)
	}
	if !slices.Equal(warned, []string{"cpu_hard_limit"}) {
		t.Errorf("warned about %v, want only cpu_hard_limit (the others are unset or honoured)", warned)
	}
}

// TestUnsupportedFieldsWarned: fields the engine cannot honour are named.
func TestUnsupportedFieldsWarned(t *testing.T) {
	pc, _ := ParsePluginConfig(nil)
	tc, err := parseTaskConfig([]byte(`{"image":"x","tty":true,"load":"img.tar","mac_address":"02:42:ac:11:00:02",
		"ipv4_address":"10.0.0.9","network_aliases":["a"],"isolation":"hyperv","advertise_ipv6_address":true}`), pc)
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, w := range unsupported(tc) {
		warned = append(warned, w.field)
		if w.why == "" {
			t.Errorf("warning for %s says no why", w.field)
		}
	}
	slices.Sort(warned)
	want := []string{"advertise_ipv6_address", "ipv4_address", "isolation", "load", "mac_address", "network_aliases", "tty"}
	if !slices.Equal(warned, want) {
		t.Errorf("warned %v, want %v", warned, want)
	}
}

// TestNomadJobInitConfig: the task config `nomad job init` writes.
func TestNomadJobInitConfig(t *testing.T) {
	pc, _ := ParsePluginConfig(nil)
	tc, err := parseTaskConfig([]byte(`{"image":"redis:7","ports":["db"],"auth_soft_fail":true}`), pc)
	if err != nil || !tc.AuthSoftFail {
		t.Fatalf("parseTaskConfig = %+v, %v", tc, err)
	}
}

// TestNomadPluginConfigKeys: Nomad's docker plugin keys are accepted;
// allow_runtimes, pids_limit and logging are honoured, the rest named as
// not honoured; typos are still refused.
func TestNomadPluginConfigKeys(t *testing.T) {
	pc, err := ParsePluginConfig([]byte(`{"allow_runtimes":["runc"],"pids_limit":100,
		"logging":{"type":"local","config":{"max-size":"5m"}},"auth":{"config":"/root/.docker/config.json","helper":"ecr"},
		"extra_labels":["job_name"],"infra_image":"pause:3","infra_image_pull_timeout":"1m","pull_activity_timeout":"2m","disable_log_collection":true,
		"gc":{"image":true,"dangling_containers":{"enabled":false}},"volumes":{"enabled":true,"selinuxlabel":"z"}}`))
	if err != nil {
		t.Fatalf("ParsePluginConfig: %v", err)
	}
	var keys []string
	for _, w := range pc.Unhonoured() {
		k, _, _ := strings.Cut(w, ":")
		keys = append(keys, k)
	}
	// infra_image is honoured: the pause containers of bridge networking.
	want := []string{"auth", "pull_activity_timeout", "extra_labels", "infra_image_pull_timeout", "disable_log_collection", "gc.dangling_containers", "volumes.selinuxlabel"}
	if !slices.Equal(keys, want) {
		t.Errorf("unhonoured %v, want %v", keys, want)
	}
	if _, err := parseTaskConfig([]byte(`{"image":"x","runtime":"nvidia"}`), pc); err == nil || !strings.Contains(err.Error(), "allow_runtimes") {
		t.Errorf("runtime outside allow_runtimes: %v", err)
	}
	if _, err := parseTaskConfig([]byte(`{"image":"x","pids_limit":500}`), pc); err == nil || !strings.Contains(err.Error(), "pids_limit 500 is above") {
		t.Errorf("pids_limit above the plugin's: %v", err)
	}
	tc, err := parseTaskConfig([]byte(`{"image":"x"}`), pc)
	if err != nil {
		t.Fatal(err)
	}
	alloc := t.TempDir()
	opts, err := createOptions(&driverpb.TaskConfig{Id: "a/t", AllocId: "a", TaskName: "t", AllocDir: alloc, TaskDir: filepath.Join(alloc, "t")}, tc, pc)
	if err != nil {
		t.Fatal(err)
	}
	if hc := opts.HostConfig; hc.PidsLimit == nil || *hc.PidsLimit != 100 || hc.LogConfig.Type != "local" || hc.LogConfig.Config["max-size"] != "5m" {
		t.Errorf("plugin defaults not applied: pids %v log %+v", hc.PidsLimit, hc.LogConfig)
	}
	for raw, want := range map[string]string{
		`{"allow_runtime":["runc"]}`:         `unknown field "allow_runtime"`,
		`{"pids_limit":-1}`:                  "pids_limit must not be negative",
		`{"pull_activity_timeout":"soon"}`:   "pull_activity_timeout",
		`{"gc":{"dangling_container":true}}`: `unknown field "dangling_container"`,
	} {
		if _, err := ParsePluginConfig([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePluginConfig(%s) = %v, want %q", raw, err, want)
		}
	}
}
