package server

import (
	"sync"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// aclResolution is the server's token resolver and the state store its
// cache belongs to: a snapshot restore replaces the store, and indexes of
// the restored state may repeat ones the cache has seen, so the cache is
// purged when the store changes.
type aclResolution struct {
	once     sync.Once
	resolver *acl.Resolver

	mu    sync.Mutex
	store *state.StateStore
}

// aclSource reads the ACL tables of one state snapshot, so that a token
// and its policies are read from the same state.
type aclSource struct{ snap *state.StateSnapshot }

func (a aclSource) ACLTokenBySecretID(secretID string) (*structs.ACLToken, error) {
	return a.snap.ACLTokenBySecretID(nil, secretID)
}

func (a aclSource) ACLPolicyByName(name string) (*structs.ACLPolicy, error) {
	return a.snap.ACLPolicyByName(nil, name)
}

// ACLEnabled reports whether the agent turned ACLs on.
func (s *Server) ACLEnabled() bool { return s.cfg.ACLEnabled }

// ResolveToken resolves an ACL secret against the replicated state: ""
// is the anonymous token (the ACL of the policy named "anonymous", or one
// allowing nothing without it); a secret no token has, or an expired
// token, is an error of kind structs.ErrPermissionDenied. With ACLs off
// every caller is management and the token is nil. Compiled ACLs are
// cached by the versions of the policies they come from.
func (s *Server) ResolveToken(secretID string) (*structs.ACLToken, *acl.ACL, error) {
	if !s.cfg.ACLEnabled {
		return nil, acl.ManagementACL, nil
	}
	r := &s.acl
	r.once.Do(func() { r.resolver = acl.NewResolver(acl.DefaultCacheSize) })
	store := s.State()
	r.mu.Lock()
	if r.store != store {
		if r.store != nil {
			r.resolver.Purge()
		}
		r.store = store
	}
	r.mu.Unlock()
	snap, err := store.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	// Secrets are UUIDs: anything else names no token and is refused
	// before it reaches the state store.
	if secretID != "" && !structs.IsUUID(secretID) {
		return nil, nil, acl.ErrTokenNotFound
	}
	return r.resolver.ResolveSecret(aclSource{snap}, secretID, s.cfg.Now())
}
