package aclendpoint

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// The rules of the ACL endpoints, apart from the reads and writes that
// surround them: every function here decides from its arguments alone
// (tokenReader is a read of one state).

// requireManagement refuses a caller whose ACL is not management; what
// names the operation for the error.
func requireManagement(c *acl.ACL, what string) error {
	if !c.IsManagement() {
		return structs.NewError(structs.ErrPermissionDenied, "Permission denied: %s needs a management token", what)
	}
	return nil
}

// mayReadPolicy: a management token reads every policy, any other token
// the policies it holds.
func mayReadPolicy(tok *structs.ACLToken, c *acl.ACL, name string) bool {
	return c.IsManagement() || (tok != nil && slices.Contains(tok.Policies, name))
}

// mayReadToken: a management token reads every token, any other token
// itself.
func mayReadToken(tok *structs.ACLToken, c *acl.ACL, accessor string) bool {
	return c.IsManagement() || (tok != nil && tok.AccessorID == accessor)
}

// bootstrapSecret is the secret a bootstrap stores: the caller's, which
// must be a UUID, or "" for a random one.
func bootstrapSecret(in string) (string, error) {
	secret := strings.TrimSpace(in)
	if secret != "" && !structs.IsUUID(secret) {
		// Nomad's exact words (its API test compares the whole message);
		// the kind stays invalid.
		return "", structs.NewError(structs.ErrInvalid, "invalid acl token")
	}
	return secret, nil
}

// checkBootstrap allows a bootstrap when none was done (done is 0) or
// when the operator's reset index names the one that was.
func checkBootstrap(done, reset uint64) error {
	if done != 0 && done != reset {
		return structs.NewError(structs.ErrInvalid, "ACL bootstrap already done (reset index: %d)", done)
	}
	return nil
}

// parseResetIndex reads the content of BootstrapResetFile.
func parseResetIndex(raw []byte) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, structs.NewError(structs.ErrInvalid, "%s must hold the reset index, a number: %v", BootstrapResetFile, err)
	}
	return n, nil
}

// errExchangeDenied is every refusal of a one-time token exchange: it
// says nothing of why, so a caller cannot probe for one-time tokens.
func errExchangeDenied() error {
	return structs.NewError(structs.ErrPermissionDenied, "Permission denied")
}

// checkExchange allows the exchange of a one-time token that exists and
// has not expired at now.
func checkExchange(ott *structs.OneTimeToken, now time.Time) error {
	if ott == nil || ott.IsExpired(now) {
		return errExchangeDenied()
	}
	return nil
}

// anyExpired reports whether a one-time token has expired at now, so
// that the expiry loop writes to Raft only when there is something to
// remove.
func anyExpired(otts []*structs.OneTimeToken, now time.Time) bool {
	for _, o := range otts {
		if o.IsExpired(now) {
			return true
		}
	}
	return false
}

func checkRequestCount(field string, n int) error {
	switch {
	case n == 0:
		return structs.NewError(structs.ErrInvalid, "%s: at least one is required", field)
	case n > MaxObjectsPerRequest:
		return structs.NewError(structs.ErrInvalid, "%s: %d in one request, more than %d; exceeds limit MaxACLObjectsPerRequest",
			field, n, MaxObjectsPerRequest)
	}
	return nil
}

// preparePolicies checks the policies of an upsert (count, name,
// description, rules, no name twice) and returns the copies to store.
func preparePolicies(policies []*structs.ACLPolicy) ([]*structs.ACLPolicy, error) {
	if err := checkRequestCount("Policies", len(policies)); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(policies))
	copies := make([]*structs.ACLPolicy, 0, len(policies))
	for _, p := range policies {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if _, err := acl.ParsePolicy(p.Name, p.Rules); err != nil {
			return nil, structs.NewError(structs.ErrInvalid, "policy %q: rules: %v", p.Name, err)
		}
		if seen[p.Name] {
			return nil, structs.NewError(structs.ErrInvalid, "policy %q: named twice in one request", p.Name)
		}
		seen[p.Name] = true
		c := &structs.ACLPolicy{Name: p.Name, Description: p.Description, Rules: p.Rules}
		c.SetHash()
		copies = append(copies, c)
	}
	return copies, nil
}

// tokenReader is the state a token upsert is checked against.
type tokenReader interface {
	ACLTokenByAccessorID(ws memdb.WatchSet, accessor string) (*structs.ACLToken, error)
	ACLPolicyByName(ws memdb.WatchSet, name string) (*structs.ACLPolicy, error)
	ACLRoleByID(ws memdb.WatchSet, id string) (*structs.ACLRole, error)
	ACLRoleByName(ws memdb.WatchSet, name string) (*structs.ACLRole, error)
}

// linkRoles resolves a token's role links (by ID, else by name) to links
// holding both; a role that does not exist is refused, as Nomad does, and
// a role linked twice is kept once.
func linkRoles(st tokenReader, in []*structs.ACLTokenRoleLink) ([]*structs.ACLTokenRoleLink, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]*structs.ACLTokenRoleLink, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, l := range in {
		var (
			r   *structs.ACLRole
			err error
		)
		switch {
		case l == nil:
			return nil, structs.NewError(structs.ErrInvalid, "token roles[%d]: must give the role's ID or Name", i)
		case l.ID != "":
			r, err = st.ACLRoleByID(nil, l.ID)
		default:
			r, err = st.ACLRoleByName(nil, l.Name)
		}
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, structs.NewError(structs.ErrInvalid, "token roles[%d] %s: no such ACL role", i, bounded(l.ID+l.Name))
		}
		if !seen[r.ID] {
			seen[r.ID] = true
			out = append(out, &structs.ACLTokenRoleLink{ID: r.ID, Name: r.Name})
		}
	}
	return out, nil
}

// newSecrets returns a new token's AccessorID and SecretID.
func newSecrets() (accessor, secret string) { return uuid.NewString(), uuid.NewString() }

// prepareTokens checks the tokens of an upsert against st and returns
// the tokens to store (see ACL.UpsertACLTokens for the rules). A new token
// takes its IDs from ids and its CreateTime from now.
func prepareTokens(st tokenReader, tokens []*structs.ACLToken, now time.Time, ids func() (string, string)) ([]*structs.ACLToken, error) {
	if err := checkRequestCount("Tokens", len(tokens)); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(tokens))
	copies := make([]*structs.ACLToken, 0, len(tokens))
	for _, in := range tokens {
		if in == nil {
			return nil, structs.NewError(structs.ErrInvalid, "token: missing")
		}
		t := &structs.ACLToken{Name: in.Name, Type: in.Type, Policies: slices.Clone(in.Policies), Global: in.Global,
			Roles: in.Copy().Roles}
		var existing *structs.ACLToken
		if in.AccessorID == "" {
			t.AccessorID, t.SecretID = ids()
			t.CreateTime = now
			t.ExpirationTTL = in.ExpirationTTL
			if in.ExpirationTime != nil {
				e := *in.ExpirationTime
				t.ExpirationTime = &e
			}
			t.Canonicalize(now)
		} else {
			if !structs.IsUUID(in.AccessorID) {
				return nil, structs.NewError(structs.ErrInvalid, "token AccessorID %q: must be a UUID", bounded(in.AccessorID))
			}
			var err error
			if existing, err = st.ACLTokenByAccessorID(nil, in.AccessorID); err != nil {
				return nil, err
			}
			if existing == nil {
				return nil, structs.NewError(structs.ErrNotFound, "ACL token not found: %s", in.AccessorID)
			}
			if in.SecretID != "" && in.SecretID != existing.SecretID {
				return nil, structs.NewError(structs.ErrInvalid, "token %s SecretID: cannot be changed", in.AccessorID)
			}
			t.AccessorID, t.SecretID, t.CreateTime = existing.AccessorID, existing.SecretID, existing.CreateTime
			t.ExpirationTTL = existing.ExpirationTTL
			switch {
			case in.ExpirationTime != nil:
				e := *in.ExpirationTime
				t.ExpirationTime = &e
			case in.ExpirationTTL == 0 && existing.ExpirationTime != nil:
				// An update that says nothing of the expiration keeps it.
				e := *existing.ExpirationTime
				t.ExpirationTime = &e
			}
		}
		if err := t.Validate(structs.DefaultACLTokenMinExpirationTTL, structs.DefaultACLTokenMaxExpirationTTL, existing); err != nil {
			return nil, err
		}
		if existing != nil && in.ExpirationTTL != 0 && in.ExpirationTTL != existing.ExpirationTTL {
			return nil, structs.NewError(structs.ErrInvalid, "token expiration TTL: cannot be changed on an existing token")
		}
		roles, err := linkRoles(st, t.Roles)
		if err != nil {
			return nil, err
		}
		t.Roles = roles
		// A token may name a policy that does not exist (yet), as
		// Nomad's: policies resolve at request time, and an absent one
		// grants nothing (see acl.Resolver).
		if seen[t.AccessorID] {
			return nil, structs.NewError(structs.ErrInvalid, "token %s: named twice in one request", t.AccessorID)
		}
		seen[t.AccessorID] = true
		t.SetHash()
		copies = append(copies, t)
	}
	return copies, nil
}

// bounded cuts a caller's value short for an error message.
func bounded(s string) string {
	const limit = 64
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
