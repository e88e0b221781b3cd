package structs

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"
)

// Nomad Variables: items (a map of strings) stored at a path in a
// namespace, encrypted at rest. The API shapes (Variable,
// VariableMetadata, VariableLock) are Nomad's; what the state store and
// the Raft log hold is VariableEncrypted, whose items are only ever
// ciphertext.

// Variable bounds, as Nomad's: a path of 1..128 characters from
// VariablePathRule, and the items of one variable at most
// MaxVariableSize bytes as JSON. The item count and key length bounds are
// drover's (Nomad has none); they keep a variable a few pages of state.
const (
	MaxVariablePathLength = 128
	MaxVariableSize       = 64 << 10
	MaxVariableItems      = 1024
	MaxVariableKeyLength  = 256
	// VariablePathRule is the path rule, the way errors quote it.
	VariablePathRule = `^[a-zA-Z0-9-_~/]{1,128}$`

	// Lock bounds: TTL between 10s and 24h (default 15s), delay at most
	// the TTL's upper bound (default 15s), as Nomad 1.7's.
	MinVariableLockTTL     = 10 * time.Second
	MaxVariableLockTTL     = 24 * time.Hour
	DefaultVariableLockTTL = 15 * time.Second
	DefaultVariableDelay   = 15 * time.Second
	MaxVariableLockDelay   = 24 * time.Hour

	// MaxVariablesListPerPage bounds a list page (?per_page).
	MaxVariablesListPerPage = 1000
)

var variablePathRE = regexp.MustCompile(VariablePathRule)

// VariableItems are the key/value pairs of a Variable.
type VariableItems map[string]string

// VariableLock is a lock held on a variable (Nomad 1.7's api.VariableLock):
// ID is the holder's secret, set by the server on acquire; TTL and
// LockDelay are Go durations ("15s").
type VariableLock struct {
	ID        string `json:",omitempty"`
	TTL       string `json:",omitempty"`
	LockDelay string `json:",omitempty"`
}

// Variable is a variable with its items in the clear: the body of
// /v1/var/<path> (Nomad's api.Variable). It never goes into Raft or the
// state store.
type Variable struct {
	Namespace   string
	Path        string
	CreateIndex uint64
	ModifyIndex uint64
	CreateTime  int64
	ModifyTime  int64
	Items       VariableItems
	Lock        *VariableLock `json:",omitempty"`
}

// VariableMetadata is a variable without its items: a list row (Nomad's
// api.VariableMetadata).
type VariableMetadata struct {
	Namespace   string
	Path        string
	CreateIndex uint64
	ModifyIndex uint64
	CreateTime  int64
	ModifyTime  int64
	Lock        *VariableLock `json:",omitempty"`
}

// Metadata returns v without its items.
func (v *Variable) Metadata() *VariableMetadata {
	return &VariableMetadata{Namespace: v.Namespace, Path: v.Path, CreateIndex: v.CreateIndex,
		ModifyIndex: v.ModifyIndex, CreateTime: v.CreateTime, ModifyTime: v.ModifyTime, Lock: v.Lock}
}

// VariableEncrypted is a variable as stored: metadata in the clear, the
// items sealed under a root key (KeyID) with AES-256-GCM, the namespace
// and path bound in as additional data. The lock's times are the
// leader's clock (unix nanoseconds).
type VariableEncrypted struct {
	Namespace   string `codec:",omitempty"`
	Path        string `codec:",omitempty"`
	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
	CreateTime  int64  `codec:",omitempty"`
	ModifyTime  int64  `codec:",omitempty"`
	// KeyID names the root key Data is sealed with.
	KeyID string `codec:",omitempty"`
	// Data is the nonce followed by the sealed JSON of the items.
	Data []byte `codec:",omitempty"`

	// The lock, when one was taken: LockID the holder's ID, LockExpires
	// when it lapses without a renewal. A lapsed lock blocks a new
	// acquire until LockExpires+LockDelay; a released lock is removed.
	LockID      string        `codec:",omitempty"`
	LockTTL     time.Duration `codec:",omitempty"`
	LockDelay   time.Duration `codec:",omitempty"`
	LockExpires int64         `codec:",omitempty"`
}

// Copy returns a deep copy.
func (v *VariableEncrypted) Copy() *VariableEncrypted {
	if v == nil {
		return nil
	}
	c := *v
	c.Data = append([]byte(nil), v.Data...)
	return &c
}

// LockHeld reports whether a lock is held at now.
func (v *VariableEncrypted) LockHeld(now time.Time) bool {
	return v.LockID != "" && now.UnixNano() < v.LockExpires
}

// LockBlocked reports whether a new lock may not be taken at now: one is
// held, or a lapsed one's delay has not run out.
func (v *VariableEncrypted) LockBlocked(now time.Time) bool {
	return v.LockID != "" && now.UnixNano() < v.LockExpires+int64(v.LockDelay)
}

// APILock is the lock as the API shows it at now (nil without a held
// lock); withID includes the holder's ID.
func (v *VariableEncrypted) APILock(now time.Time, withID bool) *VariableLock {
	if !v.LockHeld(now) {
		return nil
	}
	l := &VariableLock{TTL: v.LockTTL.String(), LockDelay: v.LockDelay.String()}
	if withID {
		l.ID = v.LockID
	}
	return l
}

// Metadata is the list row of v at now.
func (v *VariableEncrypted) Metadata(now time.Time) *VariableMetadata {
	return &VariableMetadata{Namespace: v.Namespace, Path: v.Path, CreateIndex: v.CreateIndex,
		ModifyIndex: v.ModifyIndex, CreateTime: v.CreateTime, ModifyTime: v.ModifyTime, Lock: v.APILock(now, false)}
}

// ValidVariablePath reports whether p follows VariablePathRule.
func ValidVariablePath(p string) bool {
	return len(p) <= MaxVariablePathLength && variablePathRE.MatchString(p)
}

// CleanVariablePath trims the slashes and spaces Nomad's client trims.
func CleanVariablePath(p string) string { return strings.Trim(p, " /") }

// ValidateVariablePath checks a path: the rule, no empty or dot segment,
// and under nomad/ only nomad/jobs[/...] (Nomad reserves the rest).
func ValidateVariablePath(p string) error {
	if !ValidVariablePath(p) {
		return NewError(ErrInvalid, "Path: %q must match %s", bound(p), VariablePathRule)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" {
			return NewError(ErrInvalid, "Path: %q has an empty segment", p)
		}
	}
	if p == "nomad" || strings.HasPrefix(p, "nomad/") {
		if p != "nomad/jobs" && !strings.HasPrefix(p, "nomad/jobs/") {
			return NewError(ErrInvalid, "Path: %q is reserved; under nomad/ only nomad/jobs and nomad/jobs/... may be written", p)
		}
	}
	return nil
}

func bound(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// ValidateVariableItems checks the items of a write: at least one, at
// most MaxVariableItems, non-empty keys of at most MaxVariableKeyLength
// bytes, at most MaxVariableSize bytes as JSON.
func ValidateVariableItems(items VariableItems) error {
	switch {
	case len(items) == 0:
		return NewError(ErrInvalid, "variable missing required Items object")
	case len(items) > MaxVariableItems:
		return NewError(ErrInvalid, "Items: %d items, more than %d", len(items), MaxVariableItems)
	}
	for k := range items {
		if k == "" {
			return NewError(ErrInvalid, "Items: an item key is empty")
		}
		if len(k) > MaxVariableKeyLength {
			return NewError(ErrInvalid, "Items: key %q is longer than %d bytes", bound(k), MaxVariableKeyLength)
		}
	}
	b, err := json.Marshal(items)
	if err != nil {
		return NewError(ErrInvalid, "Items: %v", err)
	}
	if len(b) > MaxVariableSize {
		return NewError(ErrTooLarge, "Items: %d bytes, more than %d", len(b), MaxVariableSize)
	}
	return nil
}

// ParseVariableLock reads a lock request's TTL and delay with their
// defaults and bounds.
func ParseVariableLock(l *VariableLock) (ttl, delay time.Duration, err error) {
	ttl, delay = DefaultVariableLockTTL, DefaultVariableDelay
	if l == nil {
		return ttl, delay, nil
	}
	if l.TTL != "" {
		if ttl, err = time.ParseDuration(l.TTL); err != nil {
			return 0, 0, NewError(ErrInvalid, "Lock.TTL: %q is not a duration", bound(l.TTL))
		}
	}
	if l.LockDelay != "" {
		if delay, err = time.ParseDuration(l.LockDelay); err != nil {
			return 0, 0, NewError(ErrInvalid, "Lock.LockDelay: %q is not a duration", bound(l.LockDelay))
		}
	}
	if ttl < MinVariableLockTTL || ttl > MaxVariableLockTTL {
		return 0, 0, NewError(ErrInvalid, "Lock.TTL: %s must be between %s and %s", ttl, MinVariableLockTTL, MaxVariableLockTTL)
	}
	if delay < 0 || delay > MaxVariableLockDelay {
		return 0, 0, NewError(ErrInvalid, "Lock.LockDelay: %s must be between 0s and %s", delay, MaxVariableLockDelay)
	}
	return ttl, delay, nil
}

// Variable operations of a VariableApplyRequest.
const (
	VarOpSet         = "set"
	VarOpDelete      = "delete"
	VarOpLockAcquire = "lock-acquire"
	VarOpLockRenew   = "lock-renew"
	VarOpLockRelease = "lock-release"
)

// VariableApplyRequest is one variable write (type 90). CAS, when set, is
// the ModifyIndex the stored variable must have (0: must not exist);
// LockID is the caller's lock, needed to write a locked variable. Var
// carries the sealed items (set, lock-acquire) and, for an acquire, the
// lock's ID, TTL and delay.
type VariableApplyRequest struct {
	Op     string             `codec:",omitempty"`
	Var    *VariableEncrypted `codec:",omitempty"`
	CAS    *uint64            `codec:",omitempty"`
	LockID string             `codec:",omitempty"`
	Now    int64              `codec:",omitempty"`
}

// StampNow implements Stamped.
func (r *VariableApplyRequest) StampNow(n int64) { stamp(&r.Now, n) }

// VariablesRekeyRequest stores variables re-sealed under another key
// (type 93): each is written only if its ModifyIndex is still the one it
// was read at, and keeps its indexes and times.
type VariablesRekeyRequest struct {
	Vars []*VariableEncrypted `codec:",omitempty"`
}

// Root key algorithm and states.
const (
	RootKeyAlgorithmAES256GCM = "aes256-gcm"
	RootKeyStateActive        = "active"
	RootKeyStateInactive      = "inactive"
	RootKeyStateRekeying      = "rekeying"
)

// RootKeyMeta is a root key's public part (Nomad's api.RootKeyMeta).
type RootKeyMeta struct {
	KeyID       string
	Algorithm   string
	CreateTime  int64
	CreateIndex uint64
	ModifyIndex uint64
	State       string
}

// RootKey is a root key as stored and replicated: its metadata and its
// 32 bytes of key material sealed (AES-256-GCM) under a key-encryption
// key. The KEK travels with it (WrapProvider "aead"), so the wrapping
// keeps the material out of casual view but protects nothing from a
// holder of the Raft data: see docs/variables.md (threat model).
type RootKey struct {
	Meta         *RootKeyMeta `codec:",omitempty"`
	WrapProvider string       `codec:",omitempty"`
	KEK          []byte       `codec:",omitempty"`
	WrappedKey   []byte       `codec:",omitempty"`
}

// Copy returns a deep copy.
func (k *RootKey) Copy() *RootKey {
	if k == nil {
		return nil
	}
	c := *k
	if k.Meta != nil {
		m := *k.Meta
		c.Meta = &m
	}
	c.KEK = append([]byte(nil), k.KEK...)
	c.WrappedKey = append([]byte(nil), k.WrappedKey...)
	return &c
}

// RootKeyUpsertRequest stores a root key (type 91); Activate makes it the
// active key and every other active key inactive.
type RootKeyUpsertRequest struct {
	Key      *RootKey `codec:",omitempty"`
	Activate bool     `codec:",omitempty"`
}

// RootKeyStateRequest sets the state of stored keys (type 92): a full
// rotation marks the old keys rekeying, then inactive when done.
type RootKeyStateRequest struct {
	KeyIDs []string `codec:",omitempty"`
	State  string   `codec:",omitempty"`
}

// RootKeyDeleteRequest removes an inactive root key (type 95).
type RootKeyDeleteRequest struct {
	KeyID string `codec:",omitempty"`
}

// VariableTaskReadArgs is a client's read of variables for a task's
// templates (RPC Variables.TaskRead): the node's credentials, the
// allocation and task reading, and either one Path or, with List, the
// paths under Prefix. A task reads without a token the variables its
// workload identity may, as Nomad's: nomad/jobs, nomad/jobs/<job>,
// nomad/jobs/<job>/<group> and nomad/jobs/<job>/<group>/<task>, in its
// allocation's namespace.
type VariableTaskReadArgs struct {
	NodeID, SecretID string
	AllocID, Task    string
	Path             string
	List             bool
	Prefix           string
	MinIndex         uint64
	MaxWait          time.Duration
}

// VariableTaskReadReply is the variable read (nil when absent or not
// readable), or the metadata of the listed ones, and the index read at.
type VariableTaskReadReply struct {
	Var   *Variable
	List  []*VariableMetadata
	Index uint64
}

// TaskVariablePaths are the variable paths a task of job/group/task may
// read implicitly.
func TaskVariablePaths(job, group, task string) []string {
	return []string{"nomad/jobs", "nomad/jobs/" + job, "nomad/jobs/" + job + "/" + group, "nomad/jobs/" + job + "/" + group + "/" + task}
}
