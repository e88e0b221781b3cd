package server

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// The RPC surface of a server. Writes sent to a follower are forwarded to
// the leader (one hop: a forwarded request is never forwarded again) with
// their error kinds intact, so callers never match on messages.

type forwardedKey struct{}

// callerIsClient reports whether an RPC comes from a client node (or from
// a caller without a certificate: the public join exchange) rather than
// from a server. Only a server's call is marked as forwarded: a server
// forwards a call at most once, so a follower that gets one has nowhere to
// send it (the leader it forwarded to has lost the lead) and refuses it
// rather than bounce it around. A client's call, authorised by its own
// certificate on the server it reached, is forwarded to the leader by a
// follower like an HTTP write; refusing it sent every node hunting for
// the leader at each election. Without the cluster PKI the caller's role
// is not known, and every call counts as a server's.
func (s *Server) callerIsClient(ctx context.Context) bool {
	if s.cfg.PKI == nil || s.cfg.PKI.Trust == nil {
		return false
	}
	st := rpc.PeerTLS(ctx)
	if st == nil || len(st.PeerCertificates) == 0 {
		return true
	}
	id, err := s.cfg.PKI.Trust.PeerIdentity(*st)
	return err != nil || id.Role != pki.RoleServer
}

// forward sends req to the leader when this server does not lead. It
// reports whether it forwarded; when it did not, the caller serves the
// request itself.
func forward[Req, Resp any](ctx context.Context, s *Server, method string, req *Req) (*Resp, bool, error) {
	conn, ok, err := leaderLink{s}.LeaderConn(ctx)
	if !ok || err != nil {
		return nil, ok, err
	}
	resp, err := rpc.Call[Req, Resp](ctx, conn, method, req)
	return resp, true, err
}

// LeaderConn is where a write goes: forward false when this server
// serves it itself, else the leader's connection (see leaderrpc.Leader).
func (l leaderLink) LeaderConn(ctx context.Context) (*rpc.Conn, bool, error) {
	s := l.s
	if s.rpcPool == nil || s.IsLeader() {
		return nil, false, nil
	}
	// A server shut down (its Raft stopped) will never know a leader
	// again: the caller must go to another server now, not wait out an
	// election that is not this server's (clients stay a while with a
	// server that answers "no leader"; see rpc.NoLeaderPatience).
	if s.shutdownCtx.Err() != nil {
		return nil, true, structs.NewError(structs.ErrUnavailable, "server is shut down")
	}
	if ctx.Value(forwardedKey{}) != nil {
		return nil, true, structs.NewError(structs.ErrNoLeader, "No cluster leader: forwarded to a server that does not lead")
	}
	addr, _ := s.raft.LeaderWithID()
	if addr == "" {
		if err := l.waitLeaderAddr(ctx); err != nil {
			return nil, true, err
		}
		addr, _ = s.raft.LeaderWithID()
		if s.IsLeader() {
			return nil, false, nil
		}
	}
	conn, err := s.rpcPool.Get(string(addr))
	if err != nil {
		return nil, true, structs.NewError(structs.ErrUnavailable, "connect to leader %s: %v", addr, err)
	}
	return conn, true, nil
}

// waitLeaderAddr waits (briefly) for an election to finish.
func (l leaderLink) waitLeaderAddr(ctx context.Context) error {
	s := l.s
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if addr, _ := s.raft.LeaderWithID(); addr != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return structs.NewError(structs.ErrNoLeader, "No cluster leader")
		case <-t.C:
		}
	}
}

// RPC argument and reply types.
type (
	JobRegisterArgs struct {
		Job            *structs.Job
		EnforceIndex   bool
		JobModifyIndex uint64
		Submission     *structs.JobSubmission
		EvalPriority   int
		PreserveCounts bool
	}
	JobRefArgs struct {
		Namespace string
		JobID     string
		Purge     bool
		// Deregister: the priority of the eval it creates (0: the job's).
		EvalPriority int
		// Evaluate: EvalOptions.ForceReschedule.
		ForceReschedule bool
	}
	JobScaleArgs struct {
		Namespace string
		JobID     string
		Request   *structs.ScalingRequest
	}
	JobRevertArgs struct {
		Namespace           string
		JobID               string
		Version             uint64
		EnforcePriorVersion *uint64
	}
	JobDispatchArgs struct {
		Namespace string
		Request   *structs.JobDispatchRequest
	}
	JobPlanArgs struct {
		Job  *structs.Job
		Diff bool
	}
	AllocStopArgs       struct{ AllocID string }
	NodeEligibilityArgs struct {
		NodeID      string
		Eligibility string
	}
	NodeDrainArgs struct {
		NodeID       string
		Spec         *structs.DrainSpec
		MarkEligible bool
		Meta         map[string]string
	}
	SchedulerConfigArgs struct {
		Config *structs.SchedulerConfiguration
		CAS    bool
		Index  uint64
	}
	SchedulerConfigReply struct {
		Updated bool
		Index   uint64
	}
	NodeRegisterArgs struct{ Node *structs.Node }
	NodeAuthArgs     struct {
		NodeID   string
		SecretID string
	}
	TTLReply       struct{ TTL time.Duration }
	NodeAllocsArgs struct {
		NodeID   string
		SecretID string
		MinIndex uint64
		MaxWait  time.Duration
	}
	NodeAllocsReply struct {
		Allocs []*structs.Allocation
		Index  uint64
	}
	NodeUpdateAllocsArgs struct {
		NodeID   string
		SecretID string
		Allocs   []*structs.Allocation
	}
	Empty struct{}
)

// RegisterRPC exposes the server's endpoints on an RPC server.
func (s *Server) RegisterRPC(rs *rpc.Server) {
	mark := func(ctx context.Context) context.Context {
		if s.callerIsClient(ctx) {
			return ctx // a node's call that reached a follower goes on to the leader
		}
		return context.WithValue(ctx, forwardedKey{}, true)
	}
	jobs, nodes := s.Jobs(), s.Nodes()
	rpc.Handle(rs, "Job.Register", func(ctx context.Context, a *JobRegisterArgs) (*structs.JobRegisterResponse, error) {
		return jobs.RegisterOpts(mark(ctx), a.Job, structs.JobRegisterOptions{
			EnforceIndex: a.EnforceIndex, JobModifyIndex: a.JobModifyIndex, Submission: a.Submission, EvalPriority: a.EvalPriority,
			PreserveCounts: a.PreserveCounts,
		})
	})
	rpc.Handle(rs, "Job.Deregister", func(ctx context.Context, a *JobRefArgs) (*structs.JobDeregisterResponse, error) {
		return jobs.DeregisterOpts(mark(ctx), a.Namespace, a.JobID, structs.JobDeregisterOptions{Purge: a.Purge, EvalPriority: a.EvalPriority})
	})
	rpc.Handle(rs, "Job.Evaluate", func(ctx context.Context, a *JobRefArgs) (*structs.JobRegisterResponse, error) {
		return jobs.Evaluate(mark(ctx), a.Namespace, a.JobID, structs.EvalOptions{ForceReschedule: a.ForceReschedule})
	})
	rpc.Handle(rs, "Job.Scale", func(ctx context.Context, a *JobScaleArgs) (*structs.JobRegisterResponse, error) {
		return jobs.Scale(mark(ctx), a.Namespace, a.JobID, a.Request)
	})
	rpc.Handle(rs, "Job.Revert", func(ctx context.Context, a *JobRevertArgs) (*structs.JobRegisterResponse, error) {
		return jobs.Revert(mark(ctx), a.Namespace, a.JobID, a.Version, a.EnforcePriorVersion)
	})
	rpc.Handle(rs, "Job.Dispatch", func(ctx context.Context, a *JobDispatchArgs) (*structs.JobDispatchResponse, error) {
		return jobs.Dispatch(mark(ctx), a.Namespace, a.Request)
	})
	rpc.Handle(rs, "Periodic.Force", func(ctx context.Context, a *JobRefArgs) (*structs.PeriodicForceResponse, error) {
		return jobs.ForcePeriodic(mark(ctx), a.Namespace, a.JobID)
	})
	rpc.Handle(rs, "Job.Plan", func(ctx context.Context, a *JobPlanArgs) (*structs.JobPlanResponse, error) {
		return jobs.Plan(mark(ctx), a.Job, a.Diff)
	})
	rpc.Handle(rs, "Alloc.Stop", func(ctx context.Context, a *AllocStopArgs) (*structs.AllocStopResponse, error) {
		return nodes.StopAlloc(mark(ctx), a.AllocID)
	})
	rpc.Handle(rs, "Node.UpdateEligibility", func(ctx context.Context, a *NodeEligibilityArgs) (*structs.NodeEligibilityUpdateResponse, error) {
		return nodes.UpdateEligibility(mark(ctx), a.NodeID, a.Eligibility)
	})
	rpc.Handle(rs, "Node.UpdateDrain", func(ctx context.Context, a *NodeDrainArgs) (*structs.NodeEligibilityUpdateResponse, error) {
		return nodes.UpdateDrain(mark(ctx), a.NodeID, a.Spec, a.MarkEligible, a.Meta)
	})
	rpc.Handle(rs, "Operator.SchedulerSetConfig", func(ctx context.Context, a *SchedulerConfigArgs) (*SchedulerConfigReply, error) {
		ok, idx, err := s.Operator().SetSchedulerConfig(mark(ctx), a.Config, a.CAS, a.Index)
		if err != nil {
			return nil, err
		}
		return &SchedulerConfigReply{Updated: ok, Index: idx}, nil
	})
	rpc.Handle(rs, "Node.Register", func(ctx context.Context, a *NodeRegisterArgs) (*TTLReply, error) {
		ttl, err := nodes.Register(mark(ctx), a.Node)
		return &TTLReply{TTL: ttl}, err
	})
	rpc.Handle(rs, "Node.Heartbeat", func(ctx context.Context, a *NodeAuthArgs) (*TTLReply, error) {
		ttl, err := nodes.Heartbeat(mark(ctx), a.NodeID, a.SecretID)
		return &TTLReply{TTL: ttl}, err
	})
	rpc.Handle(rs, "Node.GetAllocs", func(ctx context.Context, a *NodeAllocsArgs) (*NodeAllocsReply, error) {
		allocs, idx, err := nodes.Allocs(ctx, a.NodeID, a.SecretID, a.MinIndex, a.MaxWait)
		if err != nil {
			return nil, err
		}
		return &NodeAllocsReply{Allocs: allocs, Index: idx}, nil
	})
	rpc.Handle(rs, "Node.UpdateAllocs", func(ctx context.Context, a *NodeUpdateAllocsArgs) (*Empty, error) {
		return &Empty{}, nodes.UpdateAllocs(mark(ctx), a.NodeID, a.SecretID, a.Allocs)
	})
	s.Operator().register(rs, mark)
	s.Operator().registerAutopilot(rs, mark)
	s.registerACLPKIRPC(rs, mark)
	s.Namespaces().register(rs, mark)
	s.Variables().register(rs, mark)
	s.NodePools().register(rs, mark)
	s.CSI().register(rs, mark)
	s.Services().register(rs, mark)
	s.registerGCRPC(rs, mark)
	s.Deployments().register(rs, mark)
	s.registerEvalRPC(rs, mark)
	s.registerNodeAdminRPC(rs, mark)
}
