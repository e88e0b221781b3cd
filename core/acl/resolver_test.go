package acl

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// memSource is a Source over maps. Its methods are safe for concurrent
// readers while no one writes.
type memSource struct {
	tokens   map[string]*structs.ACLToken
	policies map[string]*structs.ACLPolicy
	index    uint64
	err      error
}

func newMemSource() *memSource {
	return &memSource{tokens: map[string]*structs.ACLToken{}, policies: map[string]*structs.ACLPolicy{}}
}

func (s *memSource) ACLTokenBySecretID(secret string) (*structs.ACLToken, error) {
	return s.tokens[secret], s.err
}

func (s *memSource) ACLPolicyByName(name string) (*structs.ACLPolicy, error) {
	return s.policies[name], s.err
}

// putPolicy writes a policy as the state store would: a new ModifyIndex
// and Hash on every write.
func (s *memSource) putPolicy(name, rules string) {
	s.index++
	p := &structs.ACLPolicy{Name: name, Rules: rules, CreateIndex: s.index, ModifyIndex: s.index}
	if old, ok := s.policies[name]; ok {
		p.CreateIndex = old.CreateIndex
	}
	p.SetHash()
	s.policies[name] = p
}

func (s *memSource) putToken(secret string, policies ...string) *structs.ACLToken {
	s.index++
	tok := &structs.ACLToken{AccessorID: "acc-" + secret, SecretID: secret, Type: structs.ACLClientToken,
		Policies: policies, CreateIndex: s.index, ModifyIndex: s.index}
	if len(policies) == 0 {
		tok.Type = structs.ACLManagementToken
	}
	s.tokens[secret] = tok
	return tok
}

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestResolveSecret(t *testing.T) {
	src := newMemSource()
	src.putPolicy("readers", `namespace "*" { policy = "read" }`)
	src.putPolicy("submit", `namespace "default" { capabilities = ["submit-job"] }`)
	src.putPolicy("broken", `namespace "a" { policy = "bogus" }`) // as if written by a broken server
	src.putPolicy(AnonymousPolicyName, `namespace "public" { policy = "read" }`)
	src.putToken("mgmt")
	src.putToken("reader", "readers")
	src.putToken("both", "readers", "submit", "readers")
	src.putToken("gone", "deleted-policy")
	src.putToken("bad", "broken")
	exp := now.Add(-time.Second)
	src.putToken("expired", "readers").ExpirationTime = &exp
	later := now.Add(time.Hour)
	src.putToken("fresh", "readers").ExpirationTime = &later

	r := NewResolver(0)
	for _, tc := range []struct {
		name, secret string
		wantErr      error
		check        func(*ACL) bool
	}{
		{"management", "mgmt", nil, func(a *ACL) bool { return a == ManagementACL }},
		{"client", "reader", nil, func(a *ACL) bool {
			return a.AllowNamespaceOperation("x", "read-job") && !a.AllowNamespaceOperation("x", "submit-job")
		}},
		{"policies merge", "both", nil, func(a *ACL) bool {
			return a.AllowNamespaceOperation("default", "submit-job") && a.AllowNamespaceOperation("x", "read-job") &&
				!a.AllowNamespaceOperation("x", "submit-job")
		}},
		{"missing policies are skipped", "gone", nil, func(a *ACL) bool { return !a.AllowNamespace("default") }},
		{"anonymous", "", nil, func(a *ACL) bool {
			return a.AllowNamespaceOperation("public", "read-job") && !a.AllowNamespace("default")
		}},
		{"not expired yet", "fresh", nil, func(a *ACL) bool { return a.AllowNamespace("x") }},
		{"unknown secret", "nope", ErrTokenNotFound, nil},
		{"expired", "expired", ErrTokenExpired, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, a, err := r.ResolveSecret(src, tc.secret, now)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !errors.Is(err, structs.ErrPermissionDenied) || structs.HTTPStatus(err) != 403 {
					t.Fatalf("error %v; want %v (403)", err, tc.wantErr)
				}
				if tok != nil || a != nil {
					t.Fatal("a token or ACL came with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.secret != "" && tok.SecretID != tc.secret {
				t.Errorf("token %q; want %q", tok.SecretID, tc.secret)
			}
			if tc.secret == "" && tok.AccessorID != "anonymous" {
				t.Errorf("token %+v is not the anonymous one", tok)
			}
			if !tc.check(a) {
				t.Error("ACL does not hold what the policies say")
			}
		})
	}

	t.Run("stored policy that does not parse", func(t *testing.T) {
		_, _, err := r.ResolveSecret(src, "bad", now)
		if err == nil || !strings.Contains(err.Error(), `stored ACL policy "broken" does not parse: broken:1:26: Invalid namespace policy`) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("source errors are passed on", func(t *testing.T) {
		boom := errors.New("boom")
		src := newMemSource()
		src.err = boom
		if _, _, err := r.ResolveSecret(src, "x", now); !errors.Is(err, boom) {
			t.Fatalf("error %v; want boom", err)
		}
	})
	t.Run("a token of unknown type is refused", func(t *testing.T) {
		_, err := r.ResolveToken(src, &structs.ACLToken{Type: "admin"}, now)
		if !errors.Is(err, structs.ErrPermissionDenied) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestResolverCache(t *testing.T) {
	src := newMemSource()
	src.putPolicy("a", `namespace "default" { policy = "read" }`)
	src.putPolicy("b", `node { policy = "read" }`)
	src.putToken("t1", "a", "b")
	src.putToken("t2", "b", "a") // the same set, another order
	src.putToken("t3", "a")

	r := NewResolver(2)
	resolve := func(secret string) *ACL {
		t.Helper()
		_, a, err := r.ResolveSecret(src, secret, now)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	wantStats := func(hits, misses uint64, size int) {
		t.Helper()
		h, m, s := r.CacheStats()
		if h != hits || m != misses || s != size {
			t.Fatalf("hits %d, misses %d, size %d; want %d, %d, %d", h, m, s, hits, misses, size)
		}
	}

	a1 := resolve("t1")
	wantStats(0, 1, 1)
	if resolve("t1") != a1 || resolve("t2") != a1 {
		t.Fatal("a token with the same policies did not get the cached ACL")
	}
	wantStats(2, 1, 1)

	// A policy change misses the cache, and the new rules apply at once.
	src.putPolicy("a", `namespace "default" { policy = "write" }`)
	a2 := resolve("t1")
	wantStats(2, 2, 2)
	if a2 == a1 || !a2.AllowNamespaceOperation("default", "submit-job") {
		t.Fatal("a changed policy was served from the cache")
	}
	if resolve("t2") != a2 {
		t.Fatal("the new version was not cached")
	}

	// Deleting a policy changes the key too.
	delete(src.policies, "b")
	if resolve("t1").AllowNodeRead() {
		t.Fatal("a deleted policy still grants")
	}

	// The cache holds at most its size; the least recently used goes.
	resolve("t3") // the same set as t1's now: {a}
	wantStats(4, 3, 2)
	src.putPolicy("c", `agent { policy = "read" }`)
	src.putToken("t4", "c")
	resolve("t4") // evicts {a@v2, b}
	wantStats(4, 4, 2)
	src.policies["b"] = &structs.ACLPolicy{Name: "b", Rules: `node { policy = "read" }`, ModifyIndex: 2}
	src.policies["b"].SetHash()
	resolve("t1") // {a@v2, b@2} was evicted: a miss
	wantStats(4, 5, 2)

	// A rewrite that keeps the ModifyIndex (a restored snapshot) is still
	// told apart by its Hash.
	old := src.policies["a"]
	changed := *old
	changed.Rules = `namespace "default" { policy = "deny" }`
	changed.SetHash()
	src.policies["a"] = &changed
	if resolve("t3").AllowNamespace("default") {
		t.Fatal("a policy rewritten at the same index was served from the cache")
	}

	r.Purge()
	if _, _, size := r.CacheStats(); size != 0 {
		t.Fatalf("size %d after Purge", size)
	}
}

// Concurrent resolutions of changing policy sets agree with the policies
// they were given; run under -race.
func TestResolverConcurrent(t *testing.T) {
	const versions = 8
	// Each snapshot is immutable once built, as a state snapshot is.
	snaps := make([]*memSource, versions)
	for v := range snaps {
		s := newMemSource()
		s.index = uint64(v * 100)
		for p := 0; p < 4; p++ {
			policy := "read"
			if (v+p)%2 == 0 {
				policy = "write"
			}
			s.putPolicy(fmt.Sprintf("p%d", p), fmt.Sprintf(`namespace "ns%d" { policy = %q }`, p, policy))
		}
		for tkn := 0; tkn < 4; tkn++ {
			s.putToken(fmt.Sprintf("t%d", tkn), fmt.Sprintf("p%d", tkn), fmt.Sprintf("p%d", (tkn+1)%4))
		}
		snaps[v] = s
	}
	r := NewResolver(4) // smaller than the key space: evictions race too
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				v, tkn := (g+i)%versions, i%4
				_, a, err := r.ResolveSecret(snaps[v], fmt.Sprintf("t%d", tkn), now)
				if err != nil {
					errs <- err
					return
				}
				p := tkn
				wantWrite := (v+p)%2 == 0
				if got := a.AllowNamespaceOperation(fmt.Sprintf("ns%d", p), "submit-job"); got != wantWrite {
					errs <- fmt.Errorf("version %d token %d: submit-job in ns%d = %t; want %t", v, tkn, p, got, wantWrite)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	hits, misses, size := r.CacheStats()
	if hits+misses != 8*200 || size > 4 {
		t.Errorf("hits %d + misses %d, size %d", hits, misses, size)
	}
}

func BenchmarkResolveCached(b *testing.B) {
	src := newMemSource()
	src.putPolicy("a", `namespace "default" { policy = "write" }
namespace "prod-*" { policy = "read" }
node { policy = "read" }`)
	src.putPolicy("b", `namespace "*" { policy = "read" }`)
	src.putToken("t", "a", "b")
	r := NewResolver(0)
	b.ReportAllocs()
	for b.Loop() {
		_, a, err := r.ResolveSecret(src, "t", now)
		if err != nil || !a.AllowNamespaceOperation("default", NamespaceCapabilitySubmitJob) {
			b.Fatal("refused", err)
		}
	}
}

func BenchmarkResolveUncached(b *testing.B) {
	src := newMemSource()
	src.putPolicy("a", `namespace "default" { policy = "write" }
namespace "prod-*" { policy = "read" }
node { policy = "read" }`)
	src.putToken("t", "a")
	r := NewResolver(0)
	b.ReportAllocs()
	for b.Loop() {
		r.Purge()
		if _, _, err := r.ResolveSecret(src, "t", now); err != nil {
			b.Fatal(err)
		}
	}
}
