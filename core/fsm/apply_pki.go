package fsm

import "github.com/drover-org/drover/core/structs"

// applyPKIInit stores the cluster PKI unless one is stored already; the
// response is nil either way (a refusal only for a malformed request, which
// the server never proposes).
func (f *FSM) applyPKIInit(index uint64, buf []byte) any {
	req := decode[structs.PKIInitRequest](structs.PKIInitRequestType, index, buf)
	stored, err := f.State().PKIInit(index, &req.PKI)
	if err != nil {
		return err
	}
	if stored {
		f.logger.Info("cluster PKI stored", "ca_fingerprint", req.PKI.CAFingerprint, "index", index)
	}
	return nil
}

// applyPKITokens replaces the join tokens (a rotation).
func (f *FSM) applyPKITokens(index uint64, buf []byte) any {
	req := decode[structs.PKITokensRequest](structs.PKITokensRequestType, index, buf)
	return f.State().PKISetTokens(index, req.CAFingerprint, req.Tokens)
}
