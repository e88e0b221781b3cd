package pki

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// Role is what a certificate allows its holder to be.
type Role string

const (
	// RoleServer may take part in Raft and act for any node.
	RoleServer Role = "server"
	// RoleClient may act only for its own node.
	RoleClient Role = "client"
	// AnyRole, where a role is expected, accepts both.
	AnyRole Role = ""
)

func (r Role) valid() bool { return r == RoleServer || r == RoleClient }

// uriScheme is the scheme of identity URIs.
const uriScheme = "drover"

// Identity is who an authenticated peer is: a server by name or a client by
// node ID, in one cluster.
type Identity struct {
	ClusterID string
	Role      Role
	ID        string
}

// URI is the identity's URI SAN: drover://<cluster>/<role>/<id>.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: uriScheme, Host: id.ClusterID, Path: "/" + string(id.Role) + "/" + id.ID}
}

func (id Identity) String() string { return string(id.Role) + " " + id.ID }

// RequireServer refuses anything but a server: only servers may touch Raft
// peers or act on other agents' behalf. action names what was attempted,
// for the error ("add a Raft peer").
func (id Identity) RequireServer(action string) error {
	if id.Role != RoleServer {
		return denied(ErrNotAllowed, "Permission denied: %s may not %s: only servers may", id, action)
	}
	return nil
}

// RequireNode allows a server, or the client whose node ID is nodeID: a
// client acts only for its own node.
func (id Identity) RequireNode(nodeID, action string) error {
	switch {
	case id.Role == RoleServer:
		return nil
	case id.Role == RoleClient && id.ID == nodeID:
		return nil
	}
	return denied(ErrNotAllowed, "Permission denied: %s may not %s for node %q: a client acts only for its own node", id, action, nodeID)
}

// validateClusterID: the cluster ID is the host of every identity URI and
// the CA's URI name constraint, so it must be a DNS label (a UUID is one).
func validateClusterID(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("cluster ID must be 1 to 63 characters, got %d", len(s))
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("cluster ID %q may hold only a-z, 0-9 and '-'", s)
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return fmt.Errorf("cluster ID %q may not begin or end with '-'", s)
	}
	return nil
}

// validateID: a server name or node ID is one URI path segment, kept to a
// plain alphabet so that no escaping or normalisation can make two
// spellings of one identity.
func validateID(s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("identity ID must be 1 to 128 characters, got %d", len(s))
	}
	if s == "." || s == ".." {
		return fmt.Errorf("identity ID may not be %q", s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("identity ID %q may hold only letters, digits, '-', '.' and '_'", s)
		}
	}
	return nil
}

// identityOf reads the one drover identity URI of a leaf certificate. It
// does not check the signature: callers verify the chain first.
func identityOf(cert *x509.Certificate, clusterID string) (Identity, error) {
	var found []*url.URL
	for _, u := range cert.URIs {
		if u.Scheme == uriScheme {
			found = append(found, u)
		}
	}
	if len(found) != 1 {
		return Identity{}, denied(ErrUntrusted, "certificate %s must name exactly one drover:// identity, names %d", serialOf(cert), len(found))
	}
	u := found[0]
	if u.Host != clusterID {
		return Identity{}, denied(ErrUntrusted, "certificate %s is for cluster %q, not %q", serialOf(cert), u.Host, clusterID)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) != 2 || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return Identity{}, denied(ErrUntrusted, "certificate %s has a malformed identity URI %q, want drover://<cluster>/<role>/<id>", serialOf(cert), u.String())
	}
	id := Identity{ClusterID: clusterID, Role: Role(parts[0]), ID: parts[1]}
	if !id.Role.valid() {
		return Identity{}, denied(ErrUntrusted, "certificate %s names unknown role %q", serialOf(cert), parts[0])
	}
	if err := validateID(id.ID); err != nil {
		return Identity{}, denied(ErrUntrusted, "certificate %s: %v", serialOf(cert), err)
	}
	return id, nil
}

func serialOf(cert *x509.Certificate) string {
	if cert.SerialNumber == nil {
		return "(no serial)"
	}
	return "serial " + cert.SerialNumber.Text(16)
}
