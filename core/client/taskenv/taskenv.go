// Package taskenv builds a task's environment with Nomad's variable names
// and resolves the `${…}` references of job fields against it: the task
// runner, its services and its artifacts and templates all read it.
package taskenv

import (
	"maps"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// Input is everything a task's environment is made of.
type Input struct {
	Node  *structs.Node
	Alloc *structs.Allocation
	Group *structs.TaskGroup
	Task  *structs.Task
	// Region is the agent's region, used when the job names none.
	Region string
	// Dirs as the task sees them.
	AllocDir, TaskDir, SecretsDir string
	// Path is the agent's PATH, handed to tasks so that commands resolve
	// as they would in the agent's shell.
	Path string
}

// Env is a task's environment plus what `${…}` may refer to.
type Env struct {
	// Env is the complete environment the task sees.
	Env  map[string]string
	node *structs.Node
}

// Build computes a task's environment with Nomad's variable names.
// The task's own `env` block comes last and may override anything; its
// values are interpolated against the NOMAD_* variables and the node.
func Build(in Input) *Env {
	env := make(map[string]string, 32)
	if in.Path != "" {
		env["PATH"] = in.Path
	}
	a, t, job := in.Alloc, in.Task, in.Alloc.Job

	env["NOMAD_ALLOC_DIR"] = in.AllocDir
	env["NOMAD_TASK_DIR"] = in.TaskDir
	env["NOMAD_SECRETS_DIR"] = in.SecretsDir
	env["NOMAD_ALLOC_ID"] = a.ID
	env["NOMAD_ALLOC_NAME"] = a.Name
	env["NOMAD_ALLOC_INDEX"] = strconv.Itoa(a.Index())
	env["NOMAD_SHORT_ALLOC_ID"] = ShortID(a.ID)
	env["NOMAD_GROUP_NAME"] = a.TaskGroup
	env["NOMAD_TASK_NAME"] = t.Name
	env["NOMAD_NAMESPACE"] = a.Namespace
	region := in.Region
	if job != nil {
		env["NOMAD_JOB_ID"] = job.ID
		env["NOMAD_JOB_NAME"] = job.Name
		env["NOMAD_JOB_PARENT_ID"] = job.ParentID
		if job.Region != "" {
			region = job.Region
		}
		if env["NOMAD_NAMESPACE"] == "" {
			env["NOMAD_NAMESPACE"] = job.Namespace
		}
	} else {
		env["NOMAD_JOB_ID"] = a.JobID
		env["NOMAD_JOB_NAME"] = a.JobID
	}
	env["NOMAD_REGION"] = region
	if n := in.Node; n != nil {
		env["NOMAD_DC"] = n.Datacenter
		env["NOMAD_NODE_ID"] = n.ID
		env["NOMAD_NODE_NAME"] = n.Name
		env["NOMAD_NODE_CLASS"] = n.NodeClass
	}

	cpu, mem, memMax := Limits(a, t)
	env["NOMAD_CPU_LIMIT"] = strconv.FormatInt(cpu, 10)
	env["NOMAD_MEMORY_LIMIT"] = strconv.FormatInt(mem, 10)
	if memMax > 0 {
		env["NOMAD_MEMORY_MAX_LIMIT"] = strconv.FormatInt(memMax, 10)
	}

	addPortEnv(env, a)

	// Meta: job < group < task. Nomad exports each key as written and
	// upper-cased, so tasks can use either spelling.
	meta := map[string]string{}
	if job != nil {
		maps.Copy(meta, job.Meta)
	}
	if in.Group != nil {
		maps.Copy(meta, in.Group.Meta)
	}
	maps.Copy(meta, t.Meta)
	for k, v := range meta {
		key := metaEnvKey(k)
		env["NOMAD_META_"+key] = v
		env["NOMAD_META_"+strings.ToUpper(key)] = v
	}

	te := &Env{Env: env, node: in.Node}
	// The env block is interpolated against the variables above only, not
	// against itself, so the result does not depend on map order.
	base := maps.Clone(env)
	lookup := (&Env{Env: base, node: in.Node}).Lookup
	for k, v := range t.Env {
		env[k] = Interpolate(v, lookup)
	}
	return te
}

// addPortEnv exports the ports the alloc holds, as Nomad names them:
// NOMAD_PORT_<label> is the port the task listens on (the port's `to`
// when set, else the host port), NOMAD_IP_ and NOMAD_ADDR_ the address
// to reach it at, NOMAD_HOST_PORT_, NOMAD_HOST_IP_ and NOMAD_HOST_ADDR_
// the host side; in the alloc's own network namespace NOMAD_ALLOC_IP_,
// NOMAD_ALLOC_PORT_, NOMAD_ALLOC_ADDR_ and NOMAD_ALLOC_INTERFACE_ where
// the port is inside it.
func addPortEnv(env map[string]string, a *structs.Allocation) {
	if a.AllocatedResources == nil {
		return
	}
	for _, p := range a.AllocatedResources.Shared.Ports {
		host := strconv.Itoa(p.Value)
		port := host
		if p.To > 0 {
			port = strconv.Itoa(p.To)
		}
		env["NOMAD_PORT_"+p.Label] = port
		env["NOMAD_IP_"+p.Label] = p.HostIP
		env["NOMAD_ADDR_"+p.Label] = net.JoinHostPort(p.HostIP, port)
		env["NOMAD_HOST_PORT_"+p.Label] = host
		env["NOMAD_HOST_IP_"+p.Label] = p.HostIP
		env["NOMAD_HOST_ADDR_"+p.Label] = net.JoinHostPort(p.HostIP, host)
		// In the alloc's own network namespace (bridge, cni): where
		// the port is inside it.
		if st := a.NetworkStatus; st != nil && st.Address != "" {
			env["NOMAD_ALLOC_INTERFACE_"+p.Label] = st.InterfaceName
			env["NOMAD_ALLOC_IP_"+p.Label] = st.Address
			env["NOMAD_ALLOC_PORT_"+p.Label] = port
			env["NOMAD_ALLOC_ADDR_"+p.Label] = net.JoinHostPort(st.Address, port)
		}
	}
}

// Limits returns the task's CPU (MHz) and memory (MB) reservation: what
// the plan applier reserved, else what the task asked for.
func Limits(a *structs.Allocation, t *structs.Task) (cpu, mem, memMax int64) {
	if a.AllocatedResources != nil {
		if tr, ok := a.AllocatedResources.Tasks[t.Name]; ok && tr != nil {
			return tr.Cpu.CpuShares, tr.Memory.MemoryMB, tr.Memory.MemoryMaxMB
		}
	}
	if t.Resources != nil {
		return int64(t.Resources.CPU), int64(t.Resources.MemoryMB), int64(t.Resources.MemoryMaxMB)
	}
	return 0, 0, 0
}

// metaEnvKey makes a meta key usable in a variable name: Nomad replaces
// the characters a shell does not accept ('.', '-') with '_'.
func metaEnvKey(k string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == ' ' {
			return '_'
		}
		return r
	}, k)
}

// ShortID is the first 8 characters of an ID, as NOMAD_SHORT_ALLOC_ID.
func ShortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// Lookup resolves one `${…}` reference: node.*, attr.*, meta.* (node
// meta), env.X, or a bare variable of the task env.
func (e *Env) Lookup(ref string) (string, bool) {
	n := e.node
	switch {
	case strings.HasPrefix(ref, "node."):
		if n == nil {
			return "", false
		}
		switch strings.TrimPrefix(ref, "node.") {
		case "unique.id":
			return n.ID, true
		case "unique.name":
			return n.Name, true
		case "datacenter":
			return n.Datacenter, true
		case "class":
			return n.NodeClass, true
		case "pool":
			return n.NodePool, true
		case "region":
			v, ok := e.Env["NOMAD_REGION"]
			return v, ok
		}
		return "", false
	case strings.HasPrefix(ref, "attr."):
		if n == nil {
			return "", false
		}
		v, ok := n.Attributes[strings.TrimPrefix(ref, "attr.")]
		return v, ok
	case strings.HasPrefix(ref, "meta."):
		if n == nil {
			return "", false
		}
		v, ok := n.Meta[strings.TrimPrefix(ref, "meta.")]
		return v, ok
	case strings.HasPrefix(ref, "env."):
		v, ok := e.Env[strings.TrimPrefix(ref, "env.")]
		return v, ok
	}
	v, ok := e.Env[ref]
	return v, ok
}

// Interpolate replaces each `${ref}` in s that lookup resolves. An
// unresolved reference stays as written, as in Nomad, so that a typo shows
// up verbatim in the task's view instead of vanishing.
func Interpolate(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i+2:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		ref := s[i+2 : i+2+j]
		b.WriteString(s[:i])
		if v, ok := lookup(strings.TrimSpace(ref)); ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+2+j+1])
		}
		s = s[i+2+j+1:]
	}
}

// InterpolateConfig returns a copy of a driver config with every string
// interpolated, at any depth.
func InterpolateConfig(v any, lookup func(string) (string, bool)) any {
	switch x := v.(type) {
	case string:
		return Interpolate(x, lookup)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = InterpolateConfig(e, lookup)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = InterpolateConfig(e, lookup)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = Interpolate(e, lookup)
		}
		return out
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, e := range x {
			out[i], _ = InterpolateConfig(e, lookup).(map[string]any)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[k] = Interpolate(e, lookup)
		}
		return out
	}
	return v
}

// List is env as KEY=value entries, sorted, as a process takes it.
func List(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
