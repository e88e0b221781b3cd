package structs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestValidateBlocks: a job sent as JSON (Nomad's API) with the 1.6+
// blocks gets the same defaults and refusals as a job file: what drover
// keeps is accepted, what it cannot honour is refused naming the field
// and why, and sizes are bounded before anything reaches Raft.
func TestValidateBlocks(t *testing.T) {
	dur := time.Minute
	no := false
	for _, tc := range []struct {
		name string
		mut  func(j *Job)
		want string // "" when valid
	}{
		{"kept blocks", func(j *Job) {
			j.UI = &JobUIConfig{Description: "d", Links: []*JobUILink{{Label: "l", URL: "https://x"}}}
			j.TaskGroups[0].Scaling = &ScalingPolicy{Min: 1, Max: 3, Enabled: true, Policy: map[string]any{"cooldown": "1m"}}
			j.TaskGroups[0].Disconnect = &DisconnectStrategy{Reconcile: ReconcileLongestRunning}
			task := j.TaskGroups[0].Tasks[0]
			task.Kind = "worker"
			task.Actions = []*Action{{Name: "a", Command: "/bin/true", Args: []string{"x"}}}
			task.Resources = &Resources{CPU: 100, MemoryMB: 64, SecretsMB: 4, NUMA: &NUMAResource{}}
		}, ""},
		{"device", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources = &Resources{Devices: []*RequestedDevice{{Name: "nvidia/gpu"}}}
		}, `group "g": task "t": resources: device "nvidia/gpu": not supported: drover has no device plugins`},
		{"device without a name", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources = &Resources{Devices: []*RequestedDevice{{}}}
		}, "resources: device 1: missing name"},
		{"too many devices", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources = &Resources{Devices: make([]*RequestedDevice, MaxDevicesPerTask+1)}
		}, "Resources.Devices: 17 entries; exceeds limit MaxDevicesPerTask (16)"},
		{"numa prefer", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources = &Resources{NUMA: &NUMAResource{Affinity: "prefer"}}
		}, `numa: affinity "prefer" is not supported`},
		{"numa devices", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources = &Resources{NUMA: &NUMAResource{Devices: make([]string, MaxDevicesPerTask+1)}}
		}, "Resources.NUMA.Devices: 17 entries; exceeds limit MaxDevicesPerTask (16)"},
		{"numa device name", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources = &Resources{NUMA: &NUMAResource{Devices: []string{strings.Repeat("d", 200)}}}
		}, "Resources.NUMA.Devices[0]: 200 bytes; exceeds limit MaxActionNameBytes (128)"},
		{"unencodable policy", func(j *Job) {
			j.TaskGroups[0].Scaling = &ScalingPolicy{Min: 1, Max: 4, Policy: map[string]any{"f": func() {}}}
		}, "policy is not encodable as JSON"},
		{"secrets negative", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources = &Resources{SecretsMB: -1}
		}, "resources: secrets must be between 0 and"},
		{"max_client_disconnect", func(j *Job) { j.TaskGroups[0].MaxClientDisconnect = &dur }, `group "g": max_client_disconnect: not supported`},
		{"both lost_after forms", func(j *Job) {
			j.TaskGroups[0].MaxClientDisconnect = &dur
			j.TaskGroups[0].Disconnect = &DisconnectStrategy{LostAfter: dur}
		}, "max_client_disconnect and disconnect.lost_after must not both be set"},
		{"stop_after_client_disconnect", func(j *Job) { j.TaskGroups[0].StopAfterClientDisconnect = &dur }, "stop_after_client_disconnect: not supported"},
		{"prevent_reschedule_on_lost", func(j *Job) { j.TaskGroups[0].PreventRescheduleOnLost = true }, "prevent_reschedule_on_lost: not supported"},
		{"lost_after", func(j *Job) { j.TaskGroups[0].Disconnect = &DisconnectStrategy{LostAfter: dur} }, "disconnect: lost_after: not supported"},
		{"stop_on_client_after", func(j *Job) { j.TaskGroups[0].Disconnect = &DisconnectStrategy{StopOnClientAfter: &dur} }, "disconnect: stop_on_client_after: not supported"},
		{"replace false", func(j *Job) { j.TaskGroups[0].Disconnect = &DisconnectStrategy{Replace: &no} }, "disconnect: replace: false is not supported"},
		{"bad reconcile", func(j *Job) { j.TaskGroups[0].Disconnect = &DisconnectStrategy{Reconcile: "newest"} }, `disconnect: reconcile must be "best_score"`},
		{"scaling min above max", func(j *Job) { j.TaskGroups[0].Scaling = &ScalingPolicy{Min: 3, Max: 2} }, "scaling: min (3) must not be greater than max (2)"},
		{"count above max", func(j *Job) {
			j.TaskGroups[0].Count = 5
			j.TaskGroups[0].Scaling = &ScalingPolicy{Min: 1, Max: 2}
		}, "scaling: the group's count (5) must not be greater than max (2)"},
		{"count below min", func(j *Job) { j.TaskGroups[0].Scaling = &ScalingPolicy{Min: 2, Max: 4} }, "the group's count (1) must not be less than min (2)"},
		{"scaling type", func(j *Job) { j.TaskGroups[0].Scaling = &ScalingPolicy{Max: 4, Min: 1, Type: "vertical_cpu"} }, `scaling: type must be "horizontal"`},
		{"policy too large", func(j *Job) {
			j.TaskGroups[0].Scaling = &ScalingPolicy{Min: 1, Max: 4, Policy: map[string]any{"q": strings.Repeat("x", MaxScalingPolicyBytes)}}
		}, "policy is 16392 bytes encoded; exceeds limit of 16384"},
		{"policy too deep", func(j *Job) {
			var v any = "x"
			for range MaxScalingPolicyDepth {
				v = map[string]any{"k": v}
			}
			j.TaskGroups[0].Scaling = &ScalingPolicy{Min: 1, Max: 4, Policy: map[string]any{"k": v}}
		}, "policy nests 17 levels; exceeds limit of 16"},
		{"connect kind", func(j *Job) { j.TaskGroups[0].Tasks[0].Kind = "connect-native:api" }, "Consul Connect task kind"},
		{"action without command", func(j *Job) { j.TaskGroups[0].Tasks[0].Actions = []*Action{{Name: "a"}} }, `action "a": command is required`},
		{"duplicate action", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Actions = []*Action{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}
		}, `action "a": defined more than once`},
		{"null action", func(j *Job) { j.TaskGroups[0].Tasks[0].Actions = []*Action{nil} }, "action 1: null is not allowed"},
		{"too many actions", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Actions = make([]*Action, MaxActionsPerTask+1)
		}, "Actions: 33 entries; exceeds limit MaxActionsPerTask (32)"},
		{"action arg too long", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Actions = []*Action{{Name: "a", Command: "x", Args: []string{strings.Repeat("a", MaxActionArgBytes+1)}}}
		}, "Actions[0].Args[0]: 4097 bytes; exceeds limit MaxActionArgBytes (4096)"},
		{"artifact insecure", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Artifacts = []*TaskArtifact{{GetterSource: "https://x/a", GetterInsecure: true}}
		}, "artifact 1: insecure: not supported"},
		{"artifact chown", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Artifacts = []*TaskArtifact{{GetterSource: "https://x/a", Chown: true}}
		}, "artifact 1: chown: not supported"},
		{"template once", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Templates = []*Template{{EmbeddedTmpl: "x", DestPath: "local/x", Once: true}}
		}, "template 1: once: not supported"},
		{"network dns server", func(j *Job) {
			j.TaskGroups[0].Networks = []*NetworkResource{{Mode: "host", DNS: &DNSConfig{Servers: []string{"dns.example"}}}}
		}, `network 1: dns: servers[0]: "dns.example" is not an IP address`},
		{"network dns and hostname in bridge mode", func(j *Job) {
			j.TaskGroups[0].Networks = []*NetworkResource{{Mode: "bridge", Hostname: "web", DNS: &DNSConfig{Servers: []string{"10.0.0.53"}, Searches: []string{"svc"}, Options: []string{"ndots:1"}}}}
		}, ""},
		{"network hostname in host mode", func(j *Job) {
			j.TaskGroups[0].Networks = []*NetworkResource{{Mode: "host", Hostname: "web"}}
		}, `network 1: hostname is only allowed with mode "bridge"`},
		{"network cni", func(j *Job) {
			j.TaskGroups[0].Networks = []*NetworkResource{{Mode: "host", CNI: &CNIConfig{}}}
		}, `network 1: cni is only allowed with mode "bridge"`},
		{"port ignore_collision", func(j *Job) {
			j.TaskGroups[0].Networks = []*NetworkResource{{Mode: "host", ReservedPorts: []Port{{Label: "p", Value: 8080, IgnoreCollision: true}}}}
		}, `port "p": ignore_collision is not supported`},
		{"check advertise", func(j *Job) {
			j.TaskGroups[0].Networks = []*NetworkResource{{Mode: "host", DynamicPorts: []Port{{Label: "p"}}}}
			j.TaskGroups[0].Services = []*Service{{Name: "s", Provider: "nomad", PortLabel: "p", Checks: []*ServiceCheck{{
				Name: "c", Type: "tcp", Interval: 10 * time.Second, Timeout: time.Second, Advertise: "10.0.0.1"}}}}
		}, "advertise is not supported"},
		{"ui description too long", func(j *Job) { j.UI = &JobUIConfig{Description: strings.Repeat("d", MaxUIDescriptionBytes+1)} }, "Job.UI.Description: 4097 bytes; exceeds limit MaxUIDescriptionBytes (4096)"},
		{"ui too many links", func(j *Job) { j.UI = &JobUIConfig{Links: make([]*JobUILink, MaxUILinks+1)} }, "Job.UI.Links: 33 entries; exceeds limit MaxUILinks (32)"},
		{"ui null link", func(j *Job) { j.UI = &JobUIConfig{Links: []*JobUILink{nil}} }, "ui: link 1: null is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Type: "batch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
				Name: "g", Count: 1, RestartPolicy: &RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Second, Mode: "fail"},
				Tasks: []*Task{{Name: "t", Driver: "raw_exec"}},
			}}}
			tc.mut(j)
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestCanonicalizeBlocks: Nomad's defaults of the new blocks.
func TestCanonicalizeBlocks(t *testing.T) {
	j := &Job{ID: "web", Namespace: "prod", TaskGroups: []*TaskGroup{{
		Name: "g", Count: 2,
		Scaling:    &ScalingPolicy{Min: 1, Max: 4},
		Disconnect: &DisconnectStrategy{},
		Tasks: []*Task{{Name: "t", Resources: &Resources{
			Devices: []*RequestedDevice{{Name: "gpu"}}, NUMA: &NUMAResource{},
		}}},
	}}}
	j.Canonicalize()
	j.Canonicalize() // idempotent
	tg := j.TaskGroups[0]
	if d := tg.Disconnect; d.Replace == nil || !*d.Replace || d.Reconcile != ReconcileBestScore || d.LostAfter != 0 || d.StopOnClientAfter != nil {
		t.Errorf("disconnect %+v, want replace true, reconcile best_score", d)
	}
	s := tg.Scaling
	if s.Type != "horizontal" || s.Namespace != "prod" || s.ID != ScalingPolicyID("prod", "web", "g") ||
		len(s.Target) != 3 || s.Target["Namespace"] != "prod" || s.Target["Job"] != "web" || s.Target["Group"] != "g" {
		t.Errorf("scaling %+v", s)
	}
	if id := ScalingPolicyID("prod", "web", "g"); len(id) != 36 || id == ScalingPolicyID("prod", "web", "h") || id == ScalingPolicyID("prod", "webg", "") {
		t.Errorf("policy ID %q is not a UUID-shaped digest of its target", id)
	}
	r := tg.Tasks[0].Resources
	if r.Devices[0].Count != 1 || r.NUMA.Affinity != "none" {
		t.Errorf("device %+v numa %+v, want count 1 and affinity none", r.Devices[0], r.NUMA)
	}
}

// TestTaskGroupCountFromScaling: a group sent without Count starts at its
// scaling block's min, as Nomad's client fills it; an explicit count wins.
func TestTaskGroupCountFromScaling(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"Name":"g","Scaling":{"Min":3,"Max":5}}`, 3},
		{`{"Name":"g","Scaling":{"Max":5}}`, 1},
		{`{"Name":"g","Count":0,"Scaling":{"Min":3,"Max":5}}`, 0},
		{`{"Name":"g","Scaling":{"Min":-3,"Max":5}}`, 1},
		{`{"Name":"g","Scaling":null}`, 1},
	} {
		var tg TaskGroup
		if err := json.Unmarshal([]byte(tc.body), &tg); err != nil {
			t.Fatal(err)
		}
		if tg.Count != tc.want {
			t.Errorf("%s: count %d, want %d", tc.body, tg.Count, tc.want)
		}
	}
}

// TestCheckScaleCount: a scaling request stays within the group's bounds.
func TestCheckScaleCount(t *testing.T) {
	tg := &TaskGroup{Name: "g", Scaling: &ScalingPolicy{Min: 2, Max: 4}}
	for count, want := range map[int64]string{
		1: `Count: 1 is less than the minimum of group "g"'s scaling policy (min = 2)`,
		5: `Count: 5 is greater than the maximum of group "g"'s scaling policy (max = 4)`,
		2: "", 4: "",
	} {
		err := tg.CheckScaleCount(count)
		if want == "" && err != nil || want != "" && (err == nil || err.Error() != want || KindName(err) != "invalid") {
			t.Errorf("count %d: %v, want %q", count, err, want)
		}
	}
	if err := (&TaskGroup{}).CheckScaleCount(100); err != nil {
		t.Errorf("a group without a scaling block: %v", err)
	}
}
