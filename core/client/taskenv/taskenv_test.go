package taskenv

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestBuildTaskEnv(t *testing.T) {
	node := &structs.Node{
		ID: "node-1", Name: "worker-1", Datacenter: "dc2", NodeClass: "gpu", NodePool: "pool-a",
		Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "amd64"},
		Meta:       map[string]string{"rack": "r7"},
	}
	job := &structs.Job{
		ID: "batch/dispatch-1", Name: "batch/dispatch-1", ParentID: "batch", Namespace: "prod", Region: "eu",
		Type: "batch", Meta: map[string]string{"owner": "job", "tier": "job"},
	}
	group := &structs.TaskGroup{Name: "work", Meta: map[string]string{"tier": "group", "zone": "group"}}
	task := &structs.Task{
		Name: "main", Meta: map[string]string{"zone": "task", "build.id": "42"},
		Resources: &structs.Resources{CPU: 250, MemoryMB: 128},
		Env: map[string]string{
			"GREETING": "hello from ${NOMAD_TASK_NAME} on ${node.unique.name}",
			"ARCH":     "${attr.cpu.arch}/${meta.rack}/${node.datacenter}/${node.class}/${node.pool}/${node.region}",
			"UNKNOWN":  "${attr.nope} and ${NOT_SET}",
			"DIR":      "${NOMAD_TASK_DIR}/conf",
			"PATH":     "/opt/bin:${PATH}",
		},
	}
	alloc := &structs.Allocation{
		ID: "0123456789abcdef", Name: "batch/dispatch-1.work[3]", Namespace: "prod", JobID: job.ID, Job: job, TaskGroup: "work",
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
			"main": {Cpu: structs.AllocatedCpuResources{CpuShares: 500}, Memory: structs.AllocatedMemoryResources{MemoryMB: 256, MemoryMaxMB: 512}},
		}},
	}
	env := Build(Input{
		Node: node, Alloc: alloc, Group: group, Task: task, Region: "global",
		AllocDir: "/a/alloc", TaskDir: "/a/main/local", SecretsDir: "/a/main/secrets", Path: "/usr/bin:/bin",
	}).Env

	want := map[string]string{
		"NOMAD_ALLOC_DIR":        "/a/alloc",
		"NOMAD_TASK_DIR":         "/a/main/local",
		"NOMAD_SECRETS_DIR":      "/a/main/secrets",
		"NOMAD_ALLOC_ID":         "0123456789abcdef",
		"NOMAD_SHORT_ALLOC_ID":   "01234567",
		"NOMAD_ALLOC_NAME":       "batch/dispatch-1.work[3]",
		"NOMAD_ALLOC_INDEX":      "3",
		"NOMAD_GROUP_NAME":       "work",
		"NOMAD_TASK_NAME":        "main",
		"NOMAD_JOB_ID":           "batch/dispatch-1",
		"NOMAD_JOB_NAME":         "batch/dispatch-1",
		"NOMAD_JOB_PARENT_ID":    "batch",
		"NOMAD_NAMESPACE":        "prod",
		"NOMAD_REGION":           "eu",
		"NOMAD_DC":               "dc2",
		"NOMAD_NODE_ID":          "node-1",
		"NOMAD_NODE_NAME":        "worker-1",
		"NOMAD_NODE_CLASS":       "gpu",
		"NOMAD_CPU_LIMIT":        "500",
		"NOMAD_MEMORY_LIMIT":     "256",
		"NOMAD_MEMORY_MAX_LIMIT": "512",
		"NOMAD_META_owner":       "job",
		"NOMAD_META_OWNER":       "job",
		"NOMAD_META_tier":        "group",
		"NOMAD_META_TIER":        "group",
		"NOMAD_META_zone":        "task",
		"NOMAD_META_ZONE":        "task",
		"NOMAD_META_build_id":    "42",
		"NOMAD_META_BUILD_ID":    "42",
		"GREETING":               "hello from main on worker-1",
		"ARCH":                   "amd64/r7/dc2/gpu/pool-a/eu",
		"UNKNOWN":                "${attr.nope} and ${NOT_SET}",
		"DIR":                    "/a/main/local/conf",
		"PATH":                   "/opt/bin:/usr/bin:/bin",
	}
	if !reflect.DeepEqual(env, want) {
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s = %q; want %q", k, env[k], v)
			}
		}
		for k, v := range env {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected %s = %q", k, v)
			}
		}
	}
}

func TestBuildTaskEnvFallbacks(t *testing.T) {
	// No job region, no allocated resources: the agent's region and the
	// task's asked resources are used.
	job := &structs.Job{ID: "web", Name: "web", Namespace: "default"}
	task := &structs.Task{Name: "t", Resources: &structs.Resources{CPU: 100, MemoryMB: 300}}
	alloc := &structs.Allocation{ID: "abc", Name: "web.g[0]", Job: job, TaskGroup: "g"}
	env := Build(Input{Alloc: alloc, Task: task, Region: "global"}).Env
	for k, v := range map[string]string{
		"NOMAD_REGION": "global", "NOMAD_CPU_LIMIT": "100", "NOMAD_MEMORY_LIMIT": "300",
		"NOMAD_SHORT_ALLOC_ID": "abc", "NOMAD_NAMESPACE": "default", "NOMAD_ALLOC_INDEX": "0",
	} {
		if env[k] != v {
			t.Errorf("%s = %q; want %q", k, env[k], v)
		}
	}
	if _, ok := env["NOMAD_MEMORY_MAX_LIMIT"]; ok {
		t.Error("NOMAD_MEMORY_MAX_LIMIT set without a memory max")
	}
}

func TestInterpolate(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two", "node.x": "nx"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"${A}", "1"},
		{"x${A}y${B}z", "x1ytwoz"},
		{"${ A }", "1"},
		{"${missing}", "${missing}"},
		{"${A}${missing}${B}", "1${missing}two"},
		{"unterminated ${A", "unterminated ${A"},
		{"$A and {A}", "$A and {A}"},
		{"${node.x}", "nx"},
		{"", ""},
	}
	for _, tc := range cases {
		if got := Interpolate(tc.in, lookup); got != tc.want {
			t.Errorf("Interpolate(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestInterpolateConfig(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "NOMAD_TASK_DIR" {
			return "/t/local", true
		}
		return "", false
	}
	in := map[string]any{
		"command": "${NOMAD_TASK_DIR}/run.sh",
		"args":    []any{"-c", "${NOMAD_TASK_DIR}/conf", 3.0},
		"nested":  []map[string]any{{"path": "${NOMAD_TASK_DIR}"}},
		"labels":  map[string]any{"dir": "${NOMAD_TASK_DIR}", "n": true},
	}
	got, err := json.Marshal(InterpolateConfig(in, lookup))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"args":["-c","/t/local/conf",3],"command":"/t/local/run.sh","labels":{"dir":"/t/local","n":true},"nested":[{"path":"/t/local"}]}`
	if string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if in["command"] != "${NOMAD_TASK_DIR}/run.sh" {
		t.Fatal("InterpolateConfig modified its input")
	}
}

// TestPortEnv: the alloc's ports as Nomad exports them, and
// ${NOMAD_PORT_<label>} in the driver config and the env block.
func TestPortEnv(t *testing.T) {
	alloc := &structs.Allocation{ID: "a", Name: "j.g[0]", JobID: "j", AllocatedResources: &structs.AllocatedResources{
		Shared: structs.AllocatedSharedResources{Ports: []structs.AllocatedPortMapping{
			{Label: "http", Value: 8080, To: 80, HostIP: "10.0.0.5"},
			{Label: "dyn", Value: 23456, HostIP: "10.0.0.5"},
			{Label: "v6", Value: 9000, HostIP: "2001:db8::1"},
		}},
	}}
	task := &structs.Task{Name: "t", Env: map[string]string{"LISTEN": ":${NOMAD_PORT_dyn}"}}
	te := Build(Input{Alloc: alloc, Task: task})
	want := map[string]string{
		"NOMAD_PORT_http": "80", "NOMAD_HOST_PORT_http": "8080", "NOMAD_IP_http": "10.0.0.5", "NOMAD_HOST_IP_http": "10.0.0.5",
		"NOMAD_ADDR_http": "10.0.0.5:80", "NOMAD_HOST_ADDR_http": "10.0.0.5:8080",
		"NOMAD_PORT_dyn": "23456", "NOMAD_HOST_PORT_dyn": "23456", "NOMAD_ADDR_dyn": "10.0.0.5:23456", "NOMAD_HOST_ADDR_dyn": "10.0.0.5:23456",
		"NOMAD_ADDR_v6": "[2001:db8::1]:9000",
		"LISTEN":        ":23456",
	}
	for k, v := range want {
		if got := te.Env[k]; got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	cfg := InterpolateConfig(map[string]any{"args": []any{"-listen", "${NOMAD_ADDR_http}"}}, te.Lookup).(map[string]any)
	if got := cfg["args"].([]any)[1]; got != "10.0.0.5:80" {
		t.Errorf("config arg = %v, want the interpolated address", got)
	}
}

// TestAllocNetworkEnv: in the alloc's own network namespace each port
// is also exported where it is inside it (Nomad's NOMAD_ALLOC_*); in
// host mode those are not set.
func TestAllocNetworkEnv(t *testing.T) {
	ports := []structs.AllocatedPortMapping{{Label: "http", Value: 23456, To: 8080, HostIP: "10.0.0.5"}, {Label: "raw", Value: 9000, HostIP: "10.0.0.5"}}
	tests := []struct {
		name string
		st   *structs.AllocNetworkStatus
		want map[string]string
	}{
		{"bridge", &structs.AllocNetworkStatus{InterfaceName: "eth0", Address: "172.26.64.7"}, map[string]string{
			"NOMAD_ALLOC_INTERFACE_http": "eth0", "NOMAD_ALLOC_IP_http": "172.26.64.7", "NOMAD_ALLOC_PORT_http": "8080",
			"NOMAD_ALLOC_ADDR_http": "172.26.64.7:8080", "NOMAD_ALLOC_PORT_raw": "9000", "NOMAD_HOST_PORT_http": "23456",
		}},
		{"host", nil, map[string]string{"NOMAD_ALLOC_IP_http": "", "NOMAD_ALLOC_PORT_http": "", "NOMAD_PORT_http": "8080"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alloc := &structs.Allocation{ID: "a", Name: "j.g[0]", JobID: "j", NetworkStatus: tc.st,
				AllocatedResources: &structs.AllocatedResources{Shared: structs.AllocatedSharedResources{Ports: ports}}}
			te := Build(Input{Alloc: alloc, Task: &structs.Task{Name: "t"}})
			for k, v := range tc.want {
				if got := te.Env[k]; got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}
