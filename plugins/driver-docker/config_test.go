package docker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/container"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestParsePluginConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     string
		wantErr string
		check   func(t *testing.T, c *PluginConfig)
	}{
		{name: "defaults", raw: ``, check: func(t *testing.T, c *PluginConfig) {
			if !c.GC.gcImage() || !c.GC.gcContainer() || c.GC.imageDelay != 3*time.Minute {
				t.Errorf("gc defaults: image=%v container=%v delay=%v", c.GC.gcImage(), c.GC.gcContainer(), c.GC.imageDelay)
			}
			if c.AllowPrivileged || c.Volumes.Enabled {
				t.Errorf("privileged/volumes default on: %+v", c)
			}
			if c.engineOutage != 10*time.Minute {
				t.Errorf("engine_outage_timeout default = %v, want 10m", c.engineOutage)
			}
			if !slices.Contains(c.AllowCaps, "chown") || slices.Contains(c.AllowCaps, "net_admin") {
				t.Errorf("allow_caps default = %v", c.AllowCaps)
			}
		}},
		{name: "full", raw: `{"endpoint":"unix:///var/run/docker.sock","allow_privileged":true,"allow_caps":["CAP_NET_ADMIN","chown"],
			"gc":{"image":false,"image_delay":"10s","container":false},"volumes":{"enabled":true},"engine_outage_timeout":"90s"}`,
			check: func(t *testing.T, c *PluginConfig) {
				if c.engineOutage != 90*time.Second {
					t.Errorf("engine_outage_timeout = %v, want 90s", c.engineOutage)
				}
				if c.GC.gcImage() || c.GC.gcContainer() || c.GC.imageDelay != 10*time.Second {
					t.Errorf("gc = %+v", c.GC)
				}
				if !slices.Equal(c.AllowCaps, []string{"net_admin", "chown"}) {
					t.Errorf("allow_caps = %v", c.AllowCaps)
				}
				if !c.AllowPrivileged || !c.Volumes.Enabled {
					t.Errorf("flags = %+v", c)
				}
			}},
		{name: "unknown key", raw: `{"endpoint":"unix:///x","allow_privilegd":true}`, wantErr: `unknown field "allow_privilegd"`},
		{name: "unknown gc key", raw: `{"gc":{"images":true}}`, wantErr: `unknown field "images"`},
		{name: "bad delay", raw: `{"gc":{"image_delay":"soon"}}`, wantErr: `gc.image_delay "soon" must be a non-negative duration`},
		{name: "bad outage timeout", raw: `{"engine_outage_timeout":"forever"}`, wantErr: `engine_outage_timeout "forever" must be a duration of at least 1s`},
		{name: "outage timeout too short", raw: `{"engine_outage_timeout":"10ms"}`, wantErr: `engine_outage_timeout "10ms" must be a duration of at least 1s`},
		{name: "bad endpoint", raw: `{"endpoint":"/var/run/docker.sock"}`, wantErr: `must start with unix://`},
		{name: "bad type", raw: `{"allow_privileged":"yes"}`, wantErr: `allow_privileged: must be a bool, got string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParsePluginConfig([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseTaskConfig(t *testing.T) {
	def, _ := ParsePluginConfig(nil)
	priv, _ := ParsePluginConfig([]byte(`{"allow_privileged":true}`))
	for _, tc := range []struct {
		name    string
		raw     string
		pc      *PluginConfig
		wantErr string
		check   func(t *testing.T, c *TaskConfig)
	}{
		{name: "minimal", raw: `{"image":"busybox:1"}`, check: func(t *testing.T, c *TaskConfig) {
			if c.Image != "busybox:1" {
				t.Errorf("image = %q", c.Image)
			}
		}},
		{name: "one mount block is an object, two are a list", raw: `{"image":"x","mount":{"type":"bind","source":"a","target":"/a","readonly":true},
			"auth":{"username":"u","password":"p"},"logging":{"type":"json-file","config":{"max-size":"1m"}}}`,
			check: func(t *testing.T, c *TaskConfig) {
				if len(c.Mounts) != 1 || !c.Mounts[0].Readonly || len(c.Auth) != 1 || c.Logging[0].options()["max-size"] != "1m" {
					t.Errorf("decoded = %+v", c)
				}
			}},
		{name: "mount list", raw: `{"image":"x","mount":[{"source":"a","target":"/a"},{"source":"b","target":"/b"}]}`,
			check: func(t *testing.T, c *TaskConfig) {
				if len(c.Mounts) != 2 || c.Mounts[1].Target != "/b" {
					t.Errorf("mounts = %+v", c.Mounts)
				}
			}},
		{name: "image_pull_timeout", raw: `{"image":"x","image_pull_timeout":"90s"}`, check: func(t *testing.T, c *TaskConfig) {
			if c.pullTimeout() != 90*time.Second {
				t.Errorf("pull timeout = %s, want 90s", c.pullTimeout())
			}
		}},
		{name: "image_pull_timeout default", raw: `{"image":"x"}`, check: func(t *testing.T, c *TaskConfig) {
			if c.pullTimeout() != 5*time.Minute {
				t.Errorf("pull timeout = %s, want Nomad's 5m", c.pullTimeout())
			}
		}},
		{name: "bad image_pull_timeout", raw: `{"image":"x","image_pull_timeout":"soon"}`, wantErr: `image_pull_timeout "soon" must be a positive duration`},
		{name: "negative image_pull_timeout", raw: `{"image":"x","image_pull_timeout":"-1s"}`, wantErr: "must be a positive duration"},
		{name: "empty", raw: ``, wantErr: "config: image is required"},
		{name: "no image", raw: `{"command":"sh"}`, wantErr: "config: image is required"},
		{name: "bad image reference", raw: `{"image":"Bad_Image"}`, wantErr: `image "Bad_Image" is not a valid image reference`},
		{name: "unknown field", raw: `{"image":"x","comand":"sh"}`, wantErr: `unknown field "comand"`},
		{name: "unknown mount field", raw: `{"image":"x","mount":{"src":"a","target":"/a"}}`, wantErr: `unknown field "src"`},
		{name: "args not a list", raw: `{"image":"x","args":"-c"}`, wantErr: "args: must be a list, got string"},
		{name: "ports not a list", raw: `{"image":"x","ports":"http"}`, wantErr: "ports: must be a list, got string"},
		{name: "privileged refused", raw: `{"image":"x","privileged":true}`, wantErr: "privileged is refused: the docker plugin config does not set allow_privileged = true"},
		{name: "privileged allowed", raw: `{"image":"x","privileged":true}`, pc: priv},
		{name: "cap_add outside allow_caps", raw: `{"image":"x","cap_add":["NET_ADMIN"]}`, wantErr: `cap_add[0] "NET_ADMIN" is not in the docker plugin's allow_caps`},
		{name: "cap_add allowed", raw: `{"image":"x","cap_add":["CAP_CHOWN","kill"],"cap_drop":["all"]}`},
		{name: "volume syntax", raw: `{"image":"x","volumes":["/a"]}`, wantErr: `volumes[0]: "/a" must be "host_path:container_path"`},
		{name: "volume mode", raw: `{"image":"x","volumes":["a:/a:rx"]}`, wantErr: `mode "rx" must be "ro" or "rw"`},
		{name: "mount type", raw: `{"image":"x","mount":{"type":"nfs","source":"a","target":"/a"}}`, wantErr: `mount[0].type "nfs" must be "bind", "volume" or "tmpfs"`},
		{name: "ulimit", raw: `{"image":"x","ulimit":{"nofile":"2048:1024"}}`, wantErr: `ulimit.nofile "2048:1024": hard limit 1024 is below the soft limit 2048`},
		{name: "devices", raw: `{"image":"x","devices":[{"host_path":"dev/fuse"}]}`, wantErr: `devices[0].host_path "dev/fuse" must be an absolute path`},
		{name: "oom_score_adj", raw: `{"image":"x","oom_score_adj":2000}`, wantErr: `oom_score_adj 2000 must be between -1000 and 1000`},
		{name: "port_map", raw: `{"image":"x","port_map":[{"http":0}]}`, wantErr: `port_map.http 0 must be a port`},
		{name: "propagation", raw: `{"image":"x","mount":{"source":"a","target":"/a","bind_options":{"propagation":"odd"}}}`, wantErr: `mount[0].bind_options.propagation "odd"`},
		{name: "mount target relative", raw: `{"image":"x","mount":{"source":"a","target":"a"}}`, wantErr: `mount[0].target "a" must be an absolute path`},
		{name: "work_dir relative", raw: `{"image":"x","work_dir":"tmp"}`, wantErr: `work_dir "tmp" must be an absolute path`},
		{name: "extra_hosts", raw: `{"image":"x","extra_hosts":["db"]}`, wantErr: `extra_hosts[0] "db" must be "hostname:IP"`},
		{name: "pid_mode host refused", raw: `{"image":"x","pid_mode":"host"}`, wantErr: `pid_mode "host" is refused`},
		{name: "ipc_mode bad", raw: `{"image":"x","ipc_mode":"shared"}`, wantErr: `ipc_mode "shared" must be`},
		{name: "two auth blocks", raw: `{"image":"x","auth":[{"username":"a"},{"username":"b"}]}`, wantErr: "auth may be given once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := tc.pc
			if pc == nil {
				pc = def
			}
			c, err := parseTaskConfig([]byte(tc.raw), pc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if !errors.Is(err, driver.ErrInvalidConfig) {
					t.Errorf("err %v does not wrap ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestAuthNeverPrinted(t *testing.T) {
	a := Auth{Username: "u", Password: "hunter2", ServerAddress: "r.example"}
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%v %+v %#v %s", a, a, a, a), fmt.Sprintf("%v", []Auth{a})} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("password printed: %s", s)
		}
	}
}

func TestPullOptionsCarryAuth(t *testing.T) {
	def, _ := ParsePluginConfig(nil)
	tc, err := parseTaskConfig([]byte(`{"image":"r.example/app:1","auth":{"username":"u","password":"hunter2","server_address":"r.example"}}`), def)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := pullOptions(tc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := authconfig.Decode(opts.RegistryAuth)
	if err != nil || got.Username != "u" || got.Password != "hunter2" || got.ServerAddress != "r.example" {
		t.Errorf("registry auth = %+v, %v", got, err)
	}
	if opts, _ := pullOptions(&TaskConfig{Image: "x"}); opts.RegistryAuth != "" {
		t.Errorf("auth sent without an auth block: %q", opts.RegistryAuth)
	}
}

func testTaskConfig(env map[string]string, res *driverpb.Resources) *driverpb.TaskConfig {
	return &driverpb.TaskConfig{
		Id: "a1/web", AllocId: "a1", TaskName: "web",
		AllocDir: "/data/allocs/a1", TaskDir: "/data/allocs/a1/web",
		Env: env, Resources: res, User: "nobody",
	}
}

func TestCreateOptions(t *testing.T) {
	def, _ := ParsePluginConfig(nil)
	vols, _ := ParsePluginConfig([]byte(`{"volumes":{"enabled":true}}`))
	priv, _ := ParsePluginConfig([]byte(`{"allow_privileged":true}`))
	env := map[string]string{
		"PATH": "/host/bin", "NOMAD_ALLOC_DIR": "/data/allocs/a1/alloc", "NOMAD_TASK_DIR": "/data/allocs/a1/web/local",
		"NOMAD_SECRETS_DIR": "/data/allocs/a1/web/secrets", "NOMAD_ALLOC_ID": "a1", "FOO": "bar",
	}
	baseBinds := []string{"/data/allocs/a1/alloc:/alloc", "/data/allocs/a1/web/local:/local", "/data/allocs/a1/web/secrets:/secrets"}
	for _, tc := range []struct {
		name      string
		raw       string
		pc        *PluginConfig
		res       *driverpb.Resources
		wantErr   string
		wantBinds []string
		wantCmd   []string
		wantMem   [3]int64 // memory, reservation, swap
		wantCPU   int64
		wantPriv  bool
	}{
		{name: "layout and env", raw: `{"image":"x"}`, wantBinds: baseBinds},
		{name: "privileged allowed", raw: `{"image":"x","privileged":true}`, pc: priv, wantBinds: baseBinds, wantPriv: true},
		{name: "command and args", raw: `{"image":"x","command":"sh","args":["-c","exit 3"]}`, wantBinds: baseBinds, wantCmd: []string{"sh", "-c", "exit 3"}},
		{name: "args alone", raw: `{"image":"x","args":["hello"]}`, wantBinds: baseBinds, wantCmd: []string{"hello"}},
		{name: "memory limit", raw: `{"image":"x"}`, res: &driverpb.Resources{Cpu: 500, MemoryMb: 64}, wantBinds: baseBinds,
			wantMem: [3]int64{64 << 20, 0, 64 << 20}, wantCPU: 500},
		{name: "memory_max oversubscription", raw: `{"image":"x"}`, res: &driverpb.Resources{Cpu: 1, MemoryMb: 64, MemoryMaxMb: 128}, wantBinds: baseBinds,
			wantMem: [3]int64{128 << 20, 64 << 20, 128 << 20}, wantCPU: minCPUShares},
		{name: "relative volume and mount under the task dir", raw: `{"image":"x","volumes":["data:/data:ro","../alloc/x:/x"],"mount":{"source":"local/cfg","target":"/etc/cfg","readonly":true}}`,
			wantBinds: append(slices.Clone(baseBinds), "/data/allocs/a1/web/data:/data:ro", "/data/allocs/a1/alloc/x:/x", "/data/allocs/a1/web/local/cfg:/etc/cfg:ro")},
		{name: "relative path escaping the alloc dir", raw: `{"image":"x","volumes":["../../etc:/etc"]}`, wantErr: `volumes[0]: relative host path "../../etc" leaves the allocation directory`},
		{name: "relative path binding the alloc dir", raw: `{"image":"x","volumes":["..:/up"]}`, wantErr: `volumes[0]: relative host path ".." is the allocation or a task directory itself`},
		{name: "relative path binding the task dir", raw: `{"image":"x","mount":{"source":".","target":"/t"}}`, wantErr: `mount[0].source: relative host path "." is the allocation or a task directory itself`},
		{name: "relative path binding another task dir", raw: `{"image":"x","volumes":["../other/:/o"]}`, wantErr: `relative host path "../other/" is the allocation or a task directory itself`},
		{name: "relative path binding the bind staging", raw: `{"image":"x","volumes":[".drover-binds:/s"]}`, wantErr: `relative host path ".drover-binds" is a driver's own file`},
		{name: "absolute volume needs volumes.enabled", raw: `{"image":"x","volumes":["/etc:/host-etc:ro"]}`, wantErr: `host path "/etc" needs the docker plugin config volumes { enabled = true }`},
		{name: "absolute mount needs volumes.enabled", raw: `{"image":"x","mount":{"source":"/etc","target":"/e"}}`, wantErr: `mount[0].source: host path "/etc" needs`},
		{name: "absolute volume allowed", raw: `{"image":"x","volumes":["/etc:/host-etc:ro"]}`, pc: vols, wantBinds: append(slices.Clone(baseBinds), "/etc:/host-etc:ro")},
		{name: "reserved label", raw: `{"image":"x","labels":{"com.drover.alloc_id":"evil"}}`, wantErr: `labels: "com.drover.alloc_id" is reserved`},
		{name: "bad dns", raw: `{"image":"x","dns_servers":["dns.example"]}`, wantErr: `dns_servers[0] "dns.example" is not an IP address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := tc.pc
			if pc == nil {
				pc = def
			}
			cfg := testTaskConfig(env, tc.res)
			taskCfg, err := parseTaskConfig([]byte(tc.raw), pc)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := createOptions(cfg, taskCfg, pc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, driver.ErrInvalidConfig) {
					t.Fatalf("err = %v, want ErrInvalidConfig containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if opts.Name != "web-a1" {
				t.Errorf("name = %q", opts.Name)
			}
			if !slices.Equal(opts.HostConfig.Binds, tc.wantBinds) {
				t.Errorf("binds = %q\nwant    %q", opts.HostConfig.Binds, tc.wantBinds)
			}
			if !slices.Equal(opts.Config.Cmd, tc.wantCmd) {
				t.Errorf("cmd = %q, want %q", opts.Config.Cmd, tc.wantCmd)
			}
			hc := opts.HostConfig
			if got := [3]int64{hc.Memory, hc.MemoryReservation, hc.MemorySwap}; got != tc.wantMem {
				t.Errorf("memory/reservation/swap = %v, want %v", got, tc.wantMem)
			}
			if hc.Privileged != tc.wantPriv {
				t.Errorf("privileged = %v, want %v", hc.Privileged, tc.wantPriv)
			}
			if hc.CPUShares != tc.wantCPU {
				t.Errorf("cpu shares = %d, want %d", hc.CPUShares, tc.wantCPU)
			}
			wantEnv := []string{"FOO=bar", "NOMAD_ALLOC_DIR=/alloc", "NOMAD_ALLOC_ID=a1", "NOMAD_SECRETS_DIR=/secrets", "NOMAD_TASK_DIR=/local"}
			if !slices.Equal(opts.Config.Env, wantEnv) {
				t.Errorf("env = %q, want %q", opts.Config.Env, wantEnv)
			}
			l := opts.Config.Labels
			if l[LabelAllocID] != "a1" || l[LabelTaskName] != "web" || l[LabelTaskID] != "a1/web" {
				t.Errorf("labels = %v", l)
			}
			if opts.Config.User != "nobody" {
				t.Errorf("user = %q", opts.Config.User)
			}
		})
	}
}

func TestContainerName(t *testing.T) {
	for _, tc := range []struct{ task, alloc, want string }{
		{"web", "a1", "web-a1"},
		{"kill -9 $$", "a1", "kill_-9___-a1"},
		{"_x", "a1", "_x-a1"},
	} {
		got := containerName(&driverpb.TaskConfig{TaskName: tc.task, AllocId: tc.alloc})
		if got != tc.want {
			t.Errorf("containerName(%q, %q) = %q, want %q", tc.task, tc.alloc, got, tc.want)
		}
	}
}

func TestCapDrop(t *testing.T) {
	for _, tc := range []struct {
		name        string
		drop, allow []string
		want        []string
	}{
		{"nomad's default allow_caps drops net_raw", nil, defaultCaps, []string{"net_raw"}},
		{"task drops net_raw itself", []string{"NET_RAW"}, defaultCaps, []string{"NET_RAW"}},
		{"net_raw allowed", nil, append(slices.Clone(defaultCaps), "net_raw"), nil},
		{"allow_caps narrower than the defaults", nil, []string{"chown", "kill"}, []string{
			"audit_write", "dac_override", "fowner", "fsetid", "mknod", "net_bind_service", "setfcap", "setgid", "setpcap", "setuid", "sys_chroot", "net_raw"}},
		{"already dropped", []string{"CAP_MKNOD", "all"}, []string{"chown"}, []string{"CAP_MKNOD", "all"}},
		{"allow all", nil, []string{"all"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capDrop(tc.drop, tc.allow); !slices.Equal(got, tc.want) {
				t.Errorf("capDrop = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOwnedBy(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{LabelAllocID: "a1", LabelTaskName: "web"}, true},
		{map[string]string{LabelAllocID: "a1", LabelTaskName: "db"}, false},
		{map[string]string{LabelAllocID: "a2", LabelTaskName: "web"}, false},
		{nil, false},
	} {
		if got := ownedBy(tc.labels, "a1", "web"); got != tc.want {
			t.Errorf("ownedBy(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

func TestExitResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		oom    bool
		killed bool
		want   *driverpb.ExitResult
	}{
		{"exit 3", 3, false, false, &driverpb.ExitResult{ExitCode: 3}},
		{"exit 137 of its own", 137, false, false, &driverpb.ExitResult{ExitCode: 137}},
		{"killed by stop", 137, false, true, &driverpb.ExitResult{ExitCode: 137, Signal: 9}},
		{"oom", 137, true, false, &driverpb.ExitResult{ExitCode: 137, Signal: 9, OomKilled: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exitResult(&container.State{ExitCode: tc.code, OOMKilled: tc.oom}, tc.killed)
			if got.ExitCode != tc.want.ExitCode || got.Signal != tc.want.Signal || got.OomKilled != tc.want.OomKilled {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
