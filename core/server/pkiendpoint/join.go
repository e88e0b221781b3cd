package pkiendpoint

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/structs"
)

// JoinChallenge hands out a join challenge to caller (the source host of
// the call: the key of the per-caller bound), when this server can issue.
func (p *PKI) JoinChallenge(caller string) (*JoinChallengeReply, error) {
	if _, _, err := p.clusterCA(); err != nil {
		return nil, err
	}
	ch, err := p.challenges.New(caller, time.Now())
	if err != nil {
		return nil, err
	}
	return &JoinChallengeReply{Challenge: ch}, nil
}

// Join answers a join request made for one of this server's challenges.
// A follower first catches up with the leader's log, so that a token the
// leader just rotated out is refused here too.
func (p *PKI) Join(ctx context.Context, req *pki.JoinRequest) (*pki.JoinResponse, error) {
	if err := p.deps.CatchUp(ctx); err != nil {
		return nil, err
	}
	ca, toks, err := p.clusterCA()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	grant, err := pki.VerifyJoinRequest(req, p.challenges, toks, now)
	if err != nil {
		p.logger.Warn("join refused", "role", roleOf(req), "token_id", tokenIDOf(req), "error", err)
		return nil, err
	}
	if grant.Role == pki.RoleClient {
		n, err := p.deps.State().NodeByID(nil, grant.ID)
		if err != nil {
			return nil, err
		}
		if err := checkNodeIDFree(grant.ID, n); err != nil {
			p.logger.Warn("join refused: node ID in use", "node_id", grant.ID, "token_id", grant.TokenID)
			return nil, err
		}
	}
	resp, err := ca.IssueJoin(grant, p.cfg.CertTTL, now)
	if err != nil {
		return nil, err
	}
	p.logger.Info("join granted", "role", string(grant.Role), "id", grant.ID, "token_id", grant.TokenID)
	return resp, nil
}

// Renew issues a fresh certificate for peer, for the key of csr.
func (p *PKI) Renew(peer pki.Identity, csr []byte) (*pki.JoinResponse, error) {
	ca, _, err := p.clusterCA()
	if err != nil {
		return nil, err
	}
	cert, err := ca.Renew(peer, csr, p.cfg.CertTTL, time.Now())
	if err != nil {
		return nil, err
	}
	p.logger.Debug("certificate renewed", "peer", peer.String(), "not_after", cert.NotAfter)
	return &pki.JoinResponse{Certificate: cert.Raw, CA: ca.Trust().Certificate().Raw}, nil
}

// IssueOwn issues a certificate for this server itself (the server that
// holds the CA does not call itself over RPC).
func (p *PKI) IssueOwn(req pki.IssueRequest) (*pki.JoinResponse, error) {
	ca, _, err := p.clusterCA()
	if err != nil {
		return nil, err
	}
	req.TTL = p.cfg.CertTTL
	cert, err := ca.Issue(req, time.Now())
	if err != nil {
		return nil, err
	}
	return &pki.JoinResponse{Certificate: cert.Raw, CA: ca.Trust().Certificate().Raw}, nil
}

// JoinToken is the cluster's current join token for role, as text. It is
// a secret: callers must be operators.
func (p *PKI) JoinToken(role string) (string, error) {
	r, err := parseRole(role)
	if err != nil {
		return "", err
	}
	_, toks, err := p.clusterCA()
	if err != nil {
		return "", err
	}
	return toks.Get(r).Reveal(), nil
}

// RotateJoinToken replaces the join token of role with a new one through
// Raft (leader; followers forward) and returns it. Certificates already
// issued stay valid; the old token no longer joins.
func (p *PKI) RotateJoinToken(ctx context.Context, role string) (string, error) {
	r, err := parseRole(role)
	if err != nil {
		return "", err
	}
	if resp, ok, err := leaderrpc.Forward[JoinTokenArgs, JoinTokenReply](ctx, p.deps.Leader, "PKI.RotateToken", &JoinTokenArgs{Role: role}); ok {
		if err != nil {
			return "", err
		}
		return resp.Token, nil
	}
	if p.cfg == nil {
		return "", errNoPKI()
	}
	stored, err := p.deps.State().PKI(nil)
	if err != nil {
		return "", err
	}
	if stored == nil {
		return "", structs.NewError(structs.ErrUnavailable, "the cluster has not stored its PKI in Raft yet; retry once it has a leader")
	}
	_, toks, err := p.clusterCA()
	if err != nil {
		return "", err
	}
	next, tok, err := toks.Rotate(r, rand.Reader)
	if err != nil {
		return "", err
	}
	buf, err := next.Marshal()
	if err != nil {
		return "", err
	}
	if _, err := p.deps.Apply(structs.PKITokensRequestType, &structs.PKITokensRequest{Tokens: buf, CAFingerprint: stored.CAFingerprint}); err != nil {
		return "", err
	}
	p.logger.Info("join token rotated", "role", string(r), "token_id", tok.ID())
	return tok.Reveal(), nil
}
