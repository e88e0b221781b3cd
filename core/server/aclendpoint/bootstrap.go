package aclendpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/structs"
)

// BootstrapACL creates the first management token, once: with the given
// secret (a UUID) or a random one. A second bootstrap is refused unless
// <data_dir>/acl-bootstrap-reset holds the index of the first.
func (a *ACL) BootstrapACL(ctx context.Context, bootstrapSecret string) (*structs.ACLToken, uint64, error) {
	return a.bootstrap(ctx, &BootstrapArgs{BootstrapSecret: bootstrapSecret})
}

func (a *ACL) bootstrap(ctx context.Context, args *BootstrapArgs) (*structs.ACLToken, uint64, error) {
	if r, ok, err := leaderrpc.Forward[BootstrapArgs, TokenReply](ctx, a.cfg.Leader, "ACL.Bootstrap", args); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Token, r.Index, nil
	}
	if !a.cfg.Enabled {
		return nil, 0, errDisabled
	}
	secret, err := bootstrapSecret(args.BootstrapSecret)
	if err != nil {
		return nil, 0, err
	}
	if secret == "" {
		secret = uuid.NewString()
	}
	reset := args.ResetIndex
	if reset == 0 {
		if reset, err = a.bootstrapResetIndex(); err != nil {
			return nil, 0, err
		}
	}
	if err := checkBootstrap(a.cfg.State().ACLBootstrapIndex(), reset); err != nil {
		return nil, 0, err
	}
	tok := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: secret, Name: "Bootstrap Token",
		Type: structs.ACLManagementToken, Global: true}
	tok.Canonicalize(a.cfg.Now())
	tok.SetHash()
	idx, err := a.apply(structs.ACLTokenBootstrapRequestType, &structs.ACLTokenBootstrapRequest{Token: tok, ResetIndex: reset})
	if err != nil {
		return nil, 0, err
	}
	stored, err := a.cfg.State().ACLTokenByAccessorID(nil, tok.AccessorID)
	if err != nil {
		return nil, 0, err
	}
	if stored == nil {
		return nil, 0, structs.NewError(structs.ErrUnavailable, "bootstrap token %s not found after its write", tok.AccessorID)
	}
	a.logger.Info("ACL bootstrap done", "accessor_id", tok.AccessorID, "index", idx)
	return stored.Copy(), idx, nil
}

// bootstrapResetIndex reads the reset file of the data dir: 0 when there
// is none.
func (a *ACL) bootstrapResetIndex() (uint64, error) {
	if a.cfg.DataDir == "" {
		return 0, nil
	}
	raw, err := os.ReadFile(filepath.Join(a.cfg.DataDir, BootstrapResetFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, structs.NewError(structs.ErrInvalid, "reading %s: %v", BootstrapResetFile, err)
	}
	return parseResetIndex(raw)
}
