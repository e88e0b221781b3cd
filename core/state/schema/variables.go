package schema

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// Variables and the keyring.
const (
	// TableVariables holds variables, sealed (structs.VariableEncrypted),
	// keyed by namespace and path.
	TableVariables = "variables"
	// TableRootKeys holds the keyring's root keys (wrapped) by key ID.
	TableRootKeys = "root_keys"
)

func variablesTables() []*memdb.TableSchema {
	return []*memdb.TableSchema{
		{Name: TableVariables, Indexes: indexes(
			idx("id", true, false, nsID(
				func(v *structs.VariableEncrypted) string { return v.Namespace },
				func(v *structs.VariableEncrypted) string { return v.Path })),
			idx("key_id", false, false, str(func(v *structs.VariableEncrypted) string { return v.KeyID })),
		)},
		{Name: TableRootKeys, Indexes: indexes(
			idx("id", true, false, str(func(k *structs.RootKey) string { return k.Meta.KeyID })),
		)},
	}
}
