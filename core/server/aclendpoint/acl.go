// Package aclendpoint serves ACL tokens and policies: token resolution,
// bootstrap, one-time tokens and policy and token CRUD
// (NOMAD-BEHAVIOR §6).
//
// Every method authorizes its caller itself, from the secret it is
// given: writes and token listings need a management token, a client
// token may read its own token and the policies it holds. Writes go to
// the leader (a follower forwards them, one hop); reads answer from the
// local state.
//
// The rules (who may do what, which requests are well formed, when a
// one-time token may be exchanged) are pure functions in decide.go; the
// methods read the state, apply those rules, then write through Raft.
// The server wires an ACL to its state, Raft and leader (Config) and
// registers its RPC handlers with Register.
package aclendpoint

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

const (
	// OneTimeTokenTTL is how long a one-time token can be exchanged.
	OneTimeTokenTTL = 10 * time.Minute
	// DefaultOneTimeTokenGCInterval is how often the leader removes
	// expired one-time tokens without a GC plugin.
	DefaultOneTimeTokenGCInterval = 10 * time.Minute
	// BootstrapResetFile in the data dir holds the bootstrap index an
	// operator allows a second bootstrap at, as Nomad's does.
	BootstrapResetFile = "acl-bootstrap-reset"
	// MaxObjectsPerRequest bounds the policies or tokens one write names.
	MaxObjectsPerRequest = 64
)

var errDisabled = structs.NewError(structs.ErrInvalid, "ACL support disabled")

// Config is what an ACL needs from its server.
type Config struct {
	// Enabled says the agent turned ACLs on. Without, ResolveToken makes
	// every caller management and every other method refuses with
	// structs.ErrInvalid.
	Enabled bool
	// State returns the server's current state store. A snapshot restore
	// replaces it, so the ACL calls it on each read (and purges its cache
	// of compiled ACLs when it changes).
	State func() *state.StateStore
	// Apply commits one entry through Raft on the leader and returns its
	// index once the local FSM applied it. The FSM's refusal comes back as
	// the error, its structs kind intact; without leadership the error is
	// of kind structs.ErrNoLeader.
	Apply func(t structs.MessageType, msg any) (uint64, error)
	// Leader forwards writes from a follower.
	Leader leaderrpc.Leader
	// Settled waits, on the leader, until its state holds every entry
	// committed before it took the lead (its step-up barrier passed): a
	// new leader's FSM may still lag its log. nil: no wait.
	Settled func(ctx context.Context) error
	// Now is the clock of expirations (nil: time.Now).
	Now func() time.Time
	// DataDir holds BootstrapResetFile ("": no reset file).
	DataDir string
	// Logger logs writes (nil: nothing).
	Logger hclog.Logger
}

// ACL serves the ACL endpoints of one server. The zero value is not
// usable; use New.
type ACL struct {
	cfg    Config
	logger hclog.Logger
	// exchangeRecovery bounds the recovery of an exchange whose outcome
	// is unknown (exchangeRecoveryTimeout; tests shorten it).
	exchangeRecovery time.Duration

	// resolver caches compiled ACLs; store is the state store the cache
	// belongs to: indexes of a restored state may repeat ones the cache
	// has seen, so the cache is purged when the store changes.
	resolver *acl.Resolver
	mu       sync.Mutex
	store    *state.StateStore

	// jwks caches the key sets of JWT auth methods (auth_jwt.go).
	jwks jwksCache
}

// New returns the ACL endpoints of a server.
func New(cfg Config) *ACL {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &ACL{cfg: cfg, logger: logger, exchangeRecovery: exchangeRecoveryTimeout,
		resolver: acl.NewResolver(acl.DefaultCacheSize)}
}

// ACLEnabled reports whether the agent turned ACLs on.
func (a *ACL) ACLEnabled() bool { return a.cfg.Enabled }

func (a *ACL) apply(t structs.MessageType, msg any) (uint64, error) { return a.cfg.Apply(t, msg) }
