package structs

import (
	"regexp"
	"sort"
	"sync"
)

// Bounds on namespace fields, checked before anything reaches Raft.
const (
	MaxNamespaceDescription = 256
	MaxNamespaceMetaEntries = 64
	MaxNamespaceMetaKey     = 128
	MaxNamespaceMetaValue   = 1024
)

var namespaceNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9-]{1,128}$`) })

// Namespace groups jobs, allocations and evaluations. Fields follow Nomad's
// API object so the official client decodes it; Quota, Capabilities and
// NodePoolConfiguration are not modelled (unknown fields are ignored).
type Namespace struct {
	Name        string
	Description string
	Meta        map[string]string `json:",omitempty"`
	CreateIndex uint64
	ModifyIndex uint64
}

// Validate checks the namespace against the naming rule and the bounds.
func (n *Namespace) Validate() error {
	if n == nil {
		return NewError(ErrInvalid, "namespace: missing")
	}
	if !namespaceNameRe().MatchString(n.Name) {
		return NewError(ErrInvalid, "invalid name %q. The namespace name must match regex %s", n.Name, namespaceNameRe().String())
	}
	if len(n.Description) > MaxNamespaceDescription {
		return NewError(ErrInvalid, "namespace description: longer than %d bytes", MaxNamespaceDescription)
	}
	if len(n.Meta) > MaxNamespaceMetaEntries {
		return NewError(ErrInvalid, "namespace meta: more than %d entries", MaxNamespaceMetaEntries)
	}
	keys := make([]string, 0, len(n.Meta))
	for k := range n.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || len(k) > MaxNamespaceMetaKey {
			return NewError(ErrInvalid, "namespace meta key %q: must be 1 to %d bytes", k, MaxNamespaceMetaKey)
		}
		if len(n.Meta[k]) > MaxNamespaceMetaValue {
			return NewError(ErrInvalid, "namespace meta %q: value longer than %d bytes", k, MaxNamespaceMetaValue)
		}
	}
	return nil
}

// Copy returns a deep copy.
func (n *Namespace) Copy() *Namespace {
	if n == nil {
		return nil
	}
	c := *n
	if n.Meta != nil {
		c.Meta = make(map[string]string, len(n.Meta))
		for k, v := range n.Meta {
			c.Meta[k] = v
		}
	}
	return &c
}

// NamespaceUpsertRequest is the Raft entry (NamespaceUpsertRequestType)
// that creates or updates namespaces.
type NamespaceUpsertRequest struct {
	Namespaces []*Namespace
}

// NamespaceDeleteRequest is the Raft entry (NamespaceDeleteRequestType)
// that deletes namespaces by name.
type NamespaceDeleteRequest struct {
	Namespaces []string
}

// NamespaceMissingError is the refusal of a job written into a namespace
// that does not exist, of kind ErrInvalid (HTTP 400), naming both.
func NamespaceMissingError(jobID, namespace string) error {
	return NewError(ErrInvalid, "job %q: namespace %q does not exist", jobID, namespace)
}
