package acl

import (
	"container/list"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Errors of resolution. Both are permission-denied kinds (HTTP 403), with
// Nomad's messages.
var (
	ErrTokenNotFound = structs.NewError(structs.ErrPermissionDenied, "ACL token not found")
	ErrTokenExpired  = structs.NewError(structs.ErrPermissionDenied, "ACL token expired")
)

// DefaultCacheSize is how many compiled ACLs a Resolver keeps by default.
// Tokens that name the same policies share one entry, so this counts
// distinct policy sets, not tokens.
const DefaultCacheSize = 512

// Source is the resolver's view of the ACL tables: one consistent
// snapshot of the state store, given per call so that a request checks
// against the state it reads.
//
// A token or policy that does not exist is (nil, nil), not an error. The
// resolver does not modify what it is given and keeps no reference to a
// returned token. The state must set a policy's ModifyIndex on every
// write: the cache tells policy versions apart by it (and by Hash).
type Source interface {
	ACLTokenBySecretID(secretID string) (*structs.ACLToken, error)
	ACLPolicyByName(name string) (*structs.ACLPolicy, error)
}

// RoleSource is a Source that also holds ACL roles. A token's role links
// grant the policies of the roles they name at the time of the request;
// with a Source that is not a RoleSource (or a role that no longer
// exists) a role link grants nothing.
type RoleSource interface {
	ACLRoleByID(id string) (*structs.ACLRole, error)
}

// EffectivePolicyNames returns the names of the policies a client token
// holds, its own and its roles', sorted and without repeats.
func EffectivePolicyNames(src Source, tok *structs.ACLToken) ([]string, error) {
	names := slices.Clone(tok.Policies)
	if rs, ok := src.(RoleSource); ok {
		for _, l := range tok.Roles {
			if l == nil {
				continue
			}
			r, err := rs.ACLRoleByID(l.ID)
			if err != nil {
				return nil, fmt.Errorf("looking up ACL role %q: %w", l.ID, err)
			}
			if r != nil {
				names = append(names, r.PolicyNames()...)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// AnonymousToken returns the token that stands for a request without
// one: a client token of the anonymous policy alone.
func AnonymousToken() *structs.ACLToken {
	return &structs.ACLToken{
		AccessorID: "anonymous",
		Name:       "Anonymous Token",
		Type:       structs.ACLClientToken,
		Policies:   []string{AnonymousPolicyName},
	}
}

// Resolver turns token secrets into ACLs, caching the compiled ACL of
// each set of policy versions. A token whose policy changes misses the
// cache from the change on, because the new ModifyIndex makes a new key;
// stale entries are never matched and age out of the LRU. It is safe for
// concurrent use.
type Resolver struct {
	mu    sync.Mutex
	cache *lru

	hits, misses atomic.Uint64
}

// NewResolver returns a resolver whose cache holds up to size compiled
// ACLs (DefaultCacheSize when size ≤ 0).
func NewResolver(size int) *Resolver {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Resolver{cache: newLRU(size)}
}

// ResolveSecret returns the token with secretID and its ACL, as src
// holds them at now. An empty secret is the anonymous token. A secret no
// token has is ErrTokenNotFound; an expired token is ErrTokenExpired.
func (r *Resolver) ResolveSecret(src Source, secretID string, now time.Time) (*structs.ACLToken, *ACL, error) {
	var tok *structs.ACLToken
	if secretID == "" {
		tok = AnonymousToken()
	} else {
		t, err := src.ACLTokenBySecretID(secretID)
		if err != nil {
			return nil, nil, fmt.Errorf("looking up ACL token: %w", err)
		}
		if t == nil {
			return nil, nil, ErrTokenNotFound
		}
		tok = t
	}
	a, err := r.ResolveToken(src, tok, now)
	if err != nil {
		return nil, nil, err
	}
	return tok, a, nil
}

// ResolveToken returns the ACL of a token already looked up. A
// management token is ManagementACL; a client token's policies are read
// from src, the ones that no longer exist skipped, as Nomad does.
func (r *Resolver) ResolveToken(src Source, tok *structs.ACLToken, now time.Time) (*ACL, error) {
	if tok == nil {
		return nil, ErrTokenNotFound
	}
	if tok.IsExpired(now) {
		return nil, ErrTokenExpired
	}
	if tok.IsManagement() {
		return ManagementACL, nil
	}
	if tok.Type != structs.ACLClientToken {
		return nil, structs.NewError(structs.ErrPermissionDenied, "ACL token type %q is neither client nor management", tok.Type)
	}

	names, err := EffectivePolicyNames(src, tok)
	if err != nil {
		return nil, err
	}
	policies := make([]*structs.ACLPolicy, 0, len(names))
	for _, name := range names {
		p, err := src.ACLPolicyByName(name)
		if err != nil {
			return nil, fmt.Errorf("looking up ACL policy %q: %w", name, err)
		}
		if p != nil {
			policies = append(policies, p)
		}
	}

	key := cacheKey(policies)
	r.mu.Lock()
	a, ok := r.cache.get(key)
	r.mu.Unlock()
	if ok {
		r.hits.Add(1)
		return a, nil
	}
	r.misses.Add(1)

	// Compiled outside the lock: two requests missing the same key at
	// once both compile, and the second stores an equal ACL.
	parsed := make([]*Policy, 0, len(policies))
	for _, p := range policies {
		pp, err := ParsePolicy(p.Name, p.Rules)
		if err != nil {
			// Rules are parsed before they are stored, so this is a
			// policy written by an older or broken server.
			return nil, fmt.Errorf("stored ACL policy %q does not parse: %w", p.Name, err)
		}
		parsed = append(parsed, pp)
	}
	a = Compile(parsed)
	r.mu.Lock()
	r.cache.add(key, a)
	r.mu.Unlock()
	return a, nil
}

// Purge empties the cache, e.g. when the state is restored from a
// snapshot whose indexes may repeat old ones.
func (r *Resolver) Purge() {
	r.mu.Lock()
	r.cache.purge()
	r.mu.Unlock()
}

// CacheStats reports the cache's hits and misses so far and its size.
func (r *Resolver) CacheStats() (hits, misses uint64, size int) {
	r.mu.Lock()
	size = r.cache.len()
	r.mu.Unlock()
	return r.hits.Load(), r.misses.Load(), size
}

// cacheKey names one set of policy versions: each policy's name,
// ModifyIndex and Hash, length-prefixed, in name order (policies come
// sorted by name).
func cacheKey(policies []*structs.ACLPolicy) string {
	n := 0
	for _, p := range policies {
		n += 3*binary.MaxVarintLen64 + len(p.Name) + len(p.Hash)
	}
	b := make([]byte, 0, n)
	for _, p := range policies {
		b = binary.AppendUvarint(b, uint64(len(p.Name)))
		b = append(b, p.Name...)
		b = binary.AppendUvarint(b, p.ModifyIndex)
		b = binary.AppendUvarint(b, uint64(len(p.Hash)))
		b = append(b, p.Hash...)
	}
	return string(b)
}

// lru is a fixed-size least-recently-used map of compiled ACLs. It is not
// safe for concurrent use; the Resolver's mutex guards it.
type lru struct {
	size  int
	order *list.List // front is most recent; values are *lruEntry
	items map[string]*list.Element
}

type lruEntry struct {
	key string
	acl *ACL
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), items: make(map[string]*list.Element, size)}
}

func (c *lru) get(key string) (*ACL, bool) {
	e, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry).acl, true
}

func (c *lru) add(key string, a *ACL) {
	if e, ok := c.items[key]; ok {
		e.Value.(*lruEntry).acl = a
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, acl: a})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry).key)
	}
}

func (c *lru) purge() {
	c.order.Init()
	clear(c.items)
}

func (c *lru) len() int { return c.order.Len() }
