package structs

// Raft requests of the ACL tables (§6, §9.1). Each carries the leader's
// clock (Now, see Stamped) where the FSM compares or stores times.

// ACLPolicyUpsertRequest writes policies (type 19).
type ACLPolicyUpsertRequest struct {
	Policies []*ACLPolicy `codec:",omitempty"`
}

// ACLPolicyDeleteRequest deletes policies by name (type 20).
type ACLPolicyDeleteRequest struct {
	Names []string `codec:",omitempty"`
}

// ACLTokenUpsertRequest writes tokens (type 21). The endpoint has
// validated and canonicalized them, IDs included.
type ACLTokenUpsertRequest struct {
	Tokens []*ACLToken `codec:",omitempty"`
}

// ACLTokenDeleteRequest deletes tokens by accessor, with their one-time
// tokens (type 22).
type ACLTokenDeleteRequest struct {
	AccessorIDs []string `codec:",omitempty"`
}

// ACLTokenBootstrapRequest writes the bootstrap management token (type
// 23). ResetIndex is the bootstrap index the operator allowed to be
// reset (from <data_dir>/acl-bootstrap-reset), 0 for none: the FSM refuses
// the entry when the cluster was bootstrapped at another index.
type ACLTokenBootstrapRequest struct {
	Token      *ACLToken `codec:",omitempty"`
	ResetIndex uint64    `codec:",omitempty"`
}

// OneTimeTokenUpsertRequest writes a one-time token (type 44).
type OneTimeTokenUpsertRequest struct {
	OneTimeToken *OneTimeToken `codec:",omitempty"`
}

// OneTimeTokenDeleteRequest deletes one-time tokens by accessor (type
// 45). With OneTimeSecretID set it is an exchange: the FSM deletes only
// when a one-time token with that secret and the first accessor exists
// and is not expired at Now, and refuses the entry (permission denied)
// otherwise, so that of concurrent exchanges exactly one succeeds.
// With ExchangeID also set, the FSM marks the token spent by that
// exchange instead of deleting it (expiry removes it later), and applying
// the same exchange again succeeds: a caller that could not learn the
// outcome of its entry re-applies it to find out. An entry without
// ExchangeID (written by an older version) deletes the token.
type OneTimeTokenDeleteRequest struct {
	AccessorIDs     []string `codec:",omitempty"`
	OneTimeSecretID string   `codec:",omitempty"`
	ExchangeID      string   `codec:",omitempty"`
	Now             int64    `codec:",omitempty"`
}

// OneTimeTokenExpireRequest deletes every one-time token that expired
// before Now (type 46).
type OneTimeTokenExpireRequest struct {
	Now int64 `codec:",omitempty"`
}

func (r *OneTimeTokenDeleteRequest) StampNow(n int64) { stamp(&r.Now, n) }
func (r *OneTimeTokenExpireRequest) StampNow(n int64) { stamp(&r.Now, n) }

// OneTimeTokenUpsertResponse answers PUT /v1/acl/token/onetime.
type OneTimeTokenUpsertResponse struct {
	OneTimeToken *OneTimeToken
	Index        uint64
}

// OneTimeTokenExchangeRequest is the body of PUT
// /v1/acl/token/onetime/exchange.
type OneTimeTokenExchangeRequest struct {
	OneTimeSecretID string
}

// OneTimeTokenExchangeResponse answers an exchange with the full token.
type OneTimeTokenExchangeResponse struct {
	Token *ACLToken
	Index uint64
}

// ACLRoleUpsertRequest writes roles (type 66). The endpoint has validated
// them and assigned their IDs.
type ACLRoleUpsertRequest struct {
	Roles []*ACLRole `codec:",omitempty"`
}

// ACLRoleDeleteRequest deletes roles by ID (type 67).
type ACLRoleDeleteRequest struct {
	IDs []string `codec:",omitempty"`
}
