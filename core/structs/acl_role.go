package structs

import (
	"crypto/sha256"
	"encoding/binary"
	"regexp"
)

// ACL role bounds. A role is written through Raft and read whenever a
// token holding it is resolved, so it is bounded as a policy is.
const (
	// MaxACLRoleNameLength bounds a role name (as Nomad: 128).
	MaxACLRoleNameLength = 128
	// MaxACLRoleDescriptionLength bounds a role description in bytes (as
	// Nomad: 256).
	MaxACLRoleDescriptionLength = 256
	// MaxACLRolePolicies bounds the policy links of one role.
	MaxACLRolePolicies = 256
)

// ACLRoleNameRule is Nomad's rule for role names, the way errors quote it.
const ACLRoleNameRule = `^[a-zA-Z0-9-]{1,128}$`

var aclRoleNameRE = regexp.MustCompile(ACLRoleNameRule)

// ValidACLRoleName reports whether name follows ACLRoleNameRule.
func ValidACLRoleName(name string) bool {
	return len(name) <= MaxACLRoleNameLength && aclRoleNameRE.MatchString(name)
}

// ACLRolePolicyLink names a policy a role grants. The policy need not
// exist: links resolve at request time, and an absent policy grants
// nothing (as Nomad's).
type ACLRolePolicyLink struct {
	Name string
}

// ACLTokenRoleLink links a token to a role. A request may give the ID or
// the Name; the server stores both, and resolves by ID.
type ACLTokenRoleLink struct {
	ID   string
	Name string
}

// ACLRole is a named set of policy links that tokens hold by ID or name.
// ID is a UUID the endpoint assigns on create.
type ACLRole struct {
	ID          string               `codec:",omitempty"`
	Name        string               `codec:",omitempty"`
	Description string               `codec:",omitempty"`
	Policies    []*ACLRolePolicyLink `codec:",omitempty"`
	// Hash is a digest of Name, Description and Policies (SetHash).
	Hash        []byte `codec:",omitempty"`
	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
}

// ACLRoleListStub is a role in a listing (Nomad's shape: the links too).
type ACLRoleListStub struct {
	ID          string
	Name        string
	Description string
	Policies    []*ACLRolePolicyLink
	Hash        []byte
	CreateIndex uint64
	ModifyIndex uint64
}

// PolicyNames returns the names of the role's policy links.
func (r *ACLRole) PolicyNames() []string {
	out := make([]string, 0, len(r.Policies))
	for _, p := range r.Policies {
		if p != nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// Validate checks the role's ID (when set), name, description and policy
// links: at least one, at most MaxACLRolePolicies, each a valid policy
// name, none twice. A nil role is refused.
func (r *ACLRole) Validate() error {
	var l errList
	if r == nil {
		l.add("role: missing")
		return l.err()
	}
	if r.ID != "" && !IsUUID(r.ID) {
		l.add("role ID %s: must be a UUID", quoteBounded(r.ID))
	}
	if !ValidACLRoleName(r.Name) {
		l.add("role name %s: must match %s", quoteBounded(r.Name), ACLRoleNameRule)
	}
	if n := len(r.Description); n > MaxACLRoleDescriptionLength {
		l.add("role %s: description: must be at most %d bytes (got %d)", quoteBounded(r.Name), MaxACLRoleDescriptionLength, n)
	}
	switch n := len(r.Policies); {
	case n == 0:
		l.add("role %s: policies: at least one policy link is required", quoteBounded(r.Name))
	case n > MaxACLRolePolicies:
		l.add("role %s: policies: must link at most %d policies (got %d); exceeds limit MaxACLRolePolicies",
			quoteBounded(r.Name), MaxACLRolePolicies, n)
	default:
		seen := make(map[string]bool, n)
		for i, p := range r.Policies {
			switch {
			case p == nil:
				l.add("role %s: policies[%d]: missing", quoteBounded(r.Name), i)
			case !ValidACLPolicyName(p.Name):
				l.add("role %s: policies[%d] name %s: must match %s", quoteBounded(r.Name), i, quoteBounded(p.Name), ACLPolicyNameRule)
			case seen[p.Name]:
				l.add("role %s: policies[%d] %q: linked twice", quoteBounded(r.Name), i, p.Name)
			default:
				seen[p.Name] = true
			}
		}
	}
	return l.err()
}

// SetHash sets and returns the role's Hash.
func (r *ACLRole) SetHash() []byte {
	h := sha256.New()
	writeField(h, r.Name)
	writeField(h, r.Description)
	names := r.PolicyNames()
	_ = binary.Write(h, binary.BigEndian, uint64(len(names)))
	for _, n := range names {
		writeField(h, n)
	}
	r.Hash = h.Sum(nil)
	return r.Hash
}

// Copy returns a deep copy of the role.
func (r *ACLRole) Copy() *ACLRole {
	if r == nil {
		return nil
	}
	c := *r
	c.Policies = make([]*ACLRolePolicyLink, 0, len(r.Policies))
	for _, p := range r.Policies {
		if p != nil {
			c.Policies = append(c.Policies, &ACLRolePolicyLink{Name: p.Name})
		}
	}
	c.Hash = append([]byte(nil), r.Hash...)
	return &c
}

// Stub returns the role as a listing shows it.
func (r *ACLRole) Stub() *ACLRoleListStub {
	c := r.Copy()
	return &ACLRoleListStub{ID: c.ID, Name: c.Name, Description: c.Description, Policies: c.Policies,
		Hash: c.Hash, CreateIndex: c.CreateIndex, ModifyIndex: c.ModifyIndex}
}
