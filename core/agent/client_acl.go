package agent

import (
	"context"
	"sync"
	"time"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
)

// clientACLMaxEntries bounds the tokens a client agent keeps resolved:
// past it the cache starts over, so a flood of secrets costs RPCs, never
// memory.
const clientACLMaxEntries = 1024

// clientACL resolves the tokens of requests that a client-only agent
// serves itself (logs, agent info, its plugins) by asking a server
// (ACL.ResolveToken), and keeps each answer for ttl, as Nomad's clients
// do with token_ttl: a revoked token may be honoured that long here.
type clientACL struct {
	enabled  bool
	servers  *remoteServers
	ttl      time.Duration
	now      func() time.Time
	resolver *acl.Resolver

	mu      sync.Mutex
	entries map[string]clientACLEntry
}

type clientACLEntry struct {
	reply   *server.ACLResolveReply
	expires time.Time
}

func newClientACL(enabled bool, servers *remoteServers, ttl time.Duration) *clientACL {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &clientACL{
		enabled: enabled, servers: servers, ttl: ttl, now: time.Now,
		resolver: acl.NewResolver(0), entries: map[string]clientACLEntry{},
	}
}

// ACLEnabled reports whether this agent enforces ACLs on its HTTP API.
func (c *clientACL) ACLEnabled() bool { return c.enabled }

// ResolveToken returns the token and ACL of a secret, as the servers hold
// them at most ttl ago. Servers without ACLs make every caller management.
func (c *clientACL) ResolveToken(secretID string) (*structs.ACLToken, *acl.ACL, error) {
	if !c.enabled {
		return nil, acl.ManagementACL, nil
	}
	if secretID != "" && !structs.IsUUID(secretID) {
		return nil, nil, acl.ErrTokenNotFound
	}
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[secretID]
	c.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		reply, err := call[server.ACLSecretArgs, server.ACLResolveReply](ctx, c.servers, "ACL.ResolveToken", &server.ACLSecretArgs{SecretID: secretID})
		cancel()
		if err != nil {
			return nil, nil, err
		}
		e = clientACLEntry{reply: reply, expires: now.Add(c.ttl)}
		c.mu.Lock()
		if len(c.entries) >= clientACLMaxEntries {
			clear(c.entries)
		}
		c.entries[secretID] = e
		c.mu.Unlock()
	}
	if !e.reply.Enabled {
		return nil, acl.ManagementACL, nil
	}
	a, err := c.resolver.ResolveToken(replySource{e.reply}, e.reply.Token, now)
	if err != nil {
		return nil, nil, err
	}
	return e.reply.Token, a, nil
}

// replySource is a resolver Source over one ACL.ResolveToken answer.
type replySource struct{ r *server.ACLResolveReply }

func (s replySource) ACLTokenBySecretID(string) (*structs.ACLToken, error) { return s.r.Token, nil }

func (s replySource) ACLPolicyByName(name string) (*structs.ACLPolicy, error) {
	for _, p := range s.r.Policies {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, nil
}
