package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/server/worker"
	"github.com/drover-org/drover/core/structs"
)

// ServerJoiner is implemented by a server that can join other servers
// (/v1/agent/join) and drop a dead one (/v1/agent/force-leave); errors
// keep their kinds.
type ServerJoiner interface {
	JoinServers(ctx context.Context, addrs []string) (int, error)
	ForceLeave(ctx context.Context, name string) error
}

// SchedulerWorkers is implemented by a server that runs scheduler workers
// (/v1/agent/schedulers, /v1/agent/schedulers/config).
type SchedulerWorkers interface {
	SchedulerWorkers() []worker.Info
	SchedulerWorkerConfig() (int, []string)
	// SetSchedulerWorkerConfig changes the worker count and the job types
	// the workers take; bad input is ErrInvalid naming the field.
	SetSchedulerWorkerConfig(num int, enabled []string) error
}

// RaftStatser is implemented by a server with Raft statistics (the "raft"
// section of /v1/agent/self's stats).
type RaftStatser interface {
	RaftStats() map[string]string
}

// Limits of the agent routes' inputs.
const (
	// maxProfileSeconds bounds a CPU profile or trace.
	maxProfileSeconds = 300
	// maxJoinAddrs bounds the addresses of one join.
	maxJoinAddrs = 16
	// maxAgentArg bounds a name or address given to an agent route.
	maxAgentArg = 256
)

// selfBody is the body of GET /v1/agent/self: the agent's own (config,
// member, stats) with the "nomad", "raft" and "runtime" stats sections
// `nomad agent-info` prints added where the agent left them out.
func (s *HTTPServer) selfBody() map[string]any {
	var body map[string]any
	if s.self != nil {
		body, _ = s.self().(map[string]any)
	}
	if body == nil && s.srv == nil {
		body = map[string]any{}
	}
	if body == nil {
		body = map[string]any{
			"config": map[string]any{"Region": s.region(), "Datacenter": s.datacenter()},
			"member": map[string]any{"Tags": map[string]string{"region": s.region(), "dc": s.datacenter()}},
		}
	}
	stats, _ := body["stats"].(map[string]any)
	if stats == nil {
		stats = map[string]any{}
		body["stats"] = stats
	}
	if _, ok := stats["runtime"]; !ok {
		stats["runtime"] = map[string]string{
			"arch": runtime.GOARCH, "cpu_count": strconv.Itoa(runtime.NumCPU()),
			"goroutines": strconv.Itoa(runtime.NumGoroutine()), "kernel.name": runtime.GOOS,
			"max_procs": strconv.Itoa(runtime.GOMAXPROCS(0)), "version": runtime.Version(),
		}
	}
	if s.srv == nil {
		return body
	}
	if _, ok := stats["nomad"]; !ok {
		leader := s.srv.LeaderAddr()
		isLeader := false
		if c, ok := s.srv.(Cluster); ok {
			isLeader = c.IsLeader()
		} else {
			isLeader = leader != ""
		}
		stats["nomad"] = map[string]string{
			"server": "true", "leader": strconv.FormatBool(isLeader), "leader_addr": leader,
			"bootstrap": "false", "known_regions": "1",
		}
	}
	if rs, ok := s.srv.(RaftStatser); ok {
		if _, done := stats["raft"]; !done {
			stats["raft"] = rs.RaftStats()
		}
	}
	return body
}

func (s *HTTPServer) datacenter() string {
	if s.srv == nil {
		return ""
	}
	return s.srv.Datacenter()
}

func (s agentHandlers) agentSelf(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, s.selfBody())
}

// joinResponse is the body of PUT /v1/agent/join, Nomad's: a failure to
// join is a 200 whose error says why.
type joinResponse struct {
	NumJoined int    `json:"num_joined"`
	Error     string `json:"error"`
}

// agentJoin is PUT /v1/agent/join?address=host:port[&address=...]: this
// server and those join one cluster.
func (s agentHandlers) agentJoin(w http.ResponseWriter, r *http.Request) {
	addrs := r.URL.Query()["address"]
	switch {
	case len(addrs) == 0:
		s.writeError(w, badRequest("address: at least one server address (host:port) is required"))
		return
	case len(addrs) > maxJoinAddrs:
		s.writeError(w, badRequest("address: at most %d addresses, got %d", maxJoinAddrs, len(addrs)))
		return
	}
	for _, a := range addrs {
		if a == "" || len(a) > maxAgentArg {
			s.writeError(w, badRequest("address: must be host:port of 1 to %d bytes", maxAgentArg))
			return
		}
	}
	j, ok := s.srv.(ServerJoiner)
	if !ok {
		writeText(w, http.StatusNotImplemented, "this agent runs no server that can join others")
		return
	}
	n, err := j.JoinServers(r.Context(), addrs)
	if err != nil && structs.HTTPStatus(err) == http.StatusBadRequest {
		s.writeError(w, err)
		return
	}
	out := joinResponse{NumJoined: n}
	if err != nil {
		out.Error = err.Error()
	}
	writeJSON(w, r, http.StatusOK, out)
}

// agentForceLeave is PUT /v1/agent/force-leave?node=<name>: a server that
// is no longer alive leaves the Raft configuration.
func (s agentHandlers) agentForceLeave(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("node")
	if name == "" || len(name) > maxAgentArg {
		s.writeError(w, badRequest("node: the server's name is required (1 to %d bytes)", maxAgentArg))
		return
	}
	j, ok := s.srv.(ServerJoiner)
	if !ok {
		writeText(w, http.StatusNotImplemented, "this agent runs no server")
		return
	}
	if err := j.ForceLeave(r.Context(), name); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// schedulerWorkerInfo is one worker in GET /v1/agent/schedulers.
type schedulerWorkerInfo struct {
	ID                string   `json:"id"`
	EnabledSchedulers []string `json:"enabled_schedulers"`
	Started           string   `json:"started"`
	Status            string   `json:"status"`
	WorkloadStatus    string   `json:"workload_status"`
}

// schedulerWorkersInfo is the body of GET /v1/agent/schedulers.
type schedulerWorkersInfo struct {
	ServerID   string                `json:"server_id"`
	Schedulers []schedulerWorkerInfo `json:"schedulers"`
}

// schedulerWorkerConfig is the body of GET and PUT
// /v1/agent/schedulers/config.
type schedulerWorkerConfig struct {
	ServerID          string   `json:"server_id,omitempty"`
	NumSchedulers     int      `json:"num_schedulers"`
	EnabledSchedulers []string `json:"enabled_schedulers"`
}

// schedulers returns the server's workers, or answers 400 as Nomad does
// on an agent that runs no server.
func (s agentHandlers) schedulers(w http.ResponseWriter) (SchedulerWorkers, bool) {
	sw, ok := s.srv.(SchedulerWorkers)
	if !ok {
		s.writeError(w, badRequest("this agent runs no server: it has no scheduler workers"))
	}
	return sw, ok
}

func (s agentHandlers) serverID() string {
	member, _ := s.selfBody()["member"].(map[string]any)
	if name, _ := member["Name"].(string); name != "" {
		return name
	}
	return s.nodeName
}

func (s agentHandlers) agentSchedulers(w http.ResponseWriter, r *http.Request) {
	sw, ok := s.schedulers(w)
	if !ok {
		return
	}
	_, types := sw.SchedulerWorkerConfig()
	out := schedulerWorkersInfo{ServerID: s.serverID(), Schedulers: []schedulerWorkerInfo{}}
	for _, wi := range sw.SchedulerWorkers() {
		started := ""
		if !wi.Started.IsZero() {
			started = wi.Started.Format(time.RFC3339Nano)
		}
		out.Schedulers = append(out.Schedulers, schedulerWorkerInfo{
			ID: wi.ID, EnabledSchedulers: enabledSchedulers(types), Started: started,
			Status: wi.Status, WorkloadStatus: wi.WorkloadStatus,
		})
	}
	writeJSON(w, r, http.StatusOK, out)
}

func (s agentHandlers) agentSchedulerConfigGet(w http.ResponseWriter, r *http.Request) {
	sw, ok := s.schedulers(w)
	if !ok {
		return
	}
	n, types := sw.SchedulerWorkerConfig()
	writeJSON(w, r, http.StatusOK, schedulerWorkerConfig{ServerID: s.serverID(), NumSchedulers: n, EnabledSchedulers: enabledSchedulers(types)})
}

// agentSchedulerConfigSet is PUT /v1/agent/schedulers/config: the
// number of this server's scheduler workers (0 allowed) and the job types
// they take ("_core" required, otherwise served types), changed at once
// and kept until the agent restarts, as Nomad. A request Nomad refuses
// answers Nomad's bare 400 "Invalid request" (its tests compare the
// text); the field and the rule are in the X-Drover-Error-Detail header.
func (s agentHandlers) agentSchedulerConfigSet(w http.ResponseWriter, r *http.Request) {
	var req schedulerWorkerConfig
	if err := decodeBody(r, &req); err != nil {
		if structs.HTTPStatus(err) == http.StatusBadRequest {
			err = badRequest("Invalid request: %v", err)
		}
		s.writeError(w, err)
		return
	}
	sw, ok := s.schedulers(w)
	if !ok {
		return
	}
	if err := sw.SetSchedulerWorkerConfig(req.NumSchedulers, req.EnabledSchedulers); err != nil {
		if structs.HTTPStatus(err) == http.StatusBadRequest {
			w.Header().Set(headerErrorDetail, err.Error())
			writeText(w, http.StatusBadRequest, "Invalid request")
			return
		}
		s.writeError(w, err)
		return
	}
	n, types := sw.SchedulerWorkerConfig()
	writeJSON(w, r, http.StatusOK, schedulerWorkerConfig{ServerID: s.serverID(), NumSchedulers: n, EnabledSchedulers: enabledSchedulers(types)})
}

// headerErrorDetail carries the field and rule of an error whose body is
// the bare text Nomad answers.
const headerErrorDetail = "X-Drover-Error-Detail"

// agentPprof is GET /v1/agent/pprof/<profile>: a CPU profile ("profile",
// ?seconds), an execution trace ("trace", ?seconds), the command line
// ("cmdline") or a named runtime profile (goroutine, heap, allocs, block,
// mutex, threadcreate; ?debug, ?gc). With ACLs it needs agent:write (the
// route's rule); without ACLs it is served only with enable_debug.
func (s agentHandlers) agentPprof(w http.ResponseWriter, r *http.Request) {
	if requestACL(r) == nil && !s.enableDebug {
		s.writeError(w, structs.NewError(structs.ErrPermissionDenied, "Permission denied: profiling needs enable_debug = true in the agent config when ACLs are off"))
		return
	}
	q := r.URL.Query()
	if s.refuseOtherAgent(w, r, "profiles only the agent asked") {
		return
	}
	intParam := func(name string, def, lo, hi int) (int, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, badRequest("%s: must be an integer from %d to %d, got %q", name, lo, hi, v)
		}
		return n, nil
	}
	seconds, err := intParam("seconds", 0, 0, maxProfileSeconds)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if seconds == 0 {
		seconds = 1
	}
	debug, err := intParam("debug", 0, 0, 2)
	if err != nil {
		s.writeError(w, err)
		return
	}
	gc, err := intParam("gc", 0, 0, 1)
	if err != nil {
		s.writeError(w, err)
		return
	}
	name := r.PathValue("profile")
	var buf bytes.Buffer
	contentType := "application/octet-stream"
	switch name {
	case "cmdline":
		contentType = "text/plain; charset=utf-8"
		buf.WriteString(strings.Join(os.Args, "\x00"))
	case "profile":
		if err := pprof.StartCPUProfile(&buf); err != nil {
			s.writeError(w, structs.NewError(structs.ErrConflict, "a CPU profile is already running: %v", err))
			return
		}
		s.profileWait(r.Context(), seconds)
		pprof.StopCPUProfile()
	case "trace":
		if err := trace.Start(&buf); err != nil {
			s.writeError(w, structs.NewError(structs.ErrConflict, "a trace is already running: %v", err))
			return
		}
		s.profileWait(r.Context(), seconds)
		trace.Stop()
	default:
		p := pprof.Lookup(name)
		if p == nil {
			s.writeError(w, structs.NewError(structs.ErrNotFound, "Unknown profile: %s", name))
			return
		}
		if name == "heap" && gc > 0 {
			runtime.GC()
		}
		if debug > 0 {
			contentType = "text/plain; charset=utf-8"
		}
		if err := p.WriteTo(&buf, debug); err != nil {
			s.writeError(w, err)
			return
		}
	}
	if r.Context().Err() != nil {
		return // the caller left
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if contentType == "application/octet-stream" {
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// profileWait waits the profile's seconds, or less when the caller leaves
// or the agent shuts down.
func (s agentHandlers) profileWait(ctx context.Context, seconds int) {
	t := time.NewTimer(time.Duration(seconds) * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.stopping.Done():
	}
}

// enabledSchedulers is what a worker is said to schedule: the served job
// types and Nomad's "_core" (its GC evals). drover's collector runs on the
// leader rather than through the workers; "_core" is listed because
// Nomad's tools expect every worker to carry it.
func enabledSchedulers(types []string) []string {
	out := append([]string{}, types...)
	if !slices.Contains(out, "_core") {
		out = append(out, "_core")
	}
	return out
}
