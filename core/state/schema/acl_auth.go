package schema

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// Tables of ACL auth methods, binding rules and the autopilot
// configuration.
const (
	// TableACLAuthMethods holds auth methods keyed by name.
	TableACLAuthMethods = "acl_auth_methods"
	// TableACLBindingRules holds binding rules keyed by ID, with an index
	// on their auth method.
	TableACLBindingRules = "acl_binding_rules"
	// TableAutopilotConfig holds the autopilot configuration: one row, or
	// none before an operator set one.
	TableAutopilotConfig = "autopilot_config"
)

func aclAuthTables() []*memdb.TableSchema {
	return []*memdb.TableSchema{
		{Name: TableACLAuthMethods, Indexes: indexes(
			idx("id", true, false, str(func(m *structs.ACLAuthMethod) string { return m.Name })),
		)},
		{Name: TableACLBindingRules, Indexes: indexes(
			idx("id", true, false, str(func(r *structs.ACLBindingRule) string { return r.ID })),
			idx("auth_method", false, false, str(func(r *structs.ACLBindingRule) string { return r.AuthMethod })),
		)},
		{Name: TableAutopilotConfig, Indexes: indexes(
			idx("id", true, false, &memdb.ConditionalIndex{Conditional: func(any) (bool, error) { return true, nil }}),
		)},
	}
}
