package aclendpoint

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/drover-org/drover/core/structs"
)

// Auth method and binding rule writes and logins on a follower land on
// the leader; the leader's refusals keep their kind on the way back.
func TestFollowerForwardsAuthAndLogin(t *testing.T) {
	ctx := context.Background()
	leader := aclServer(t, nil, nil)
	follower := aclServer(t, nil, func(c *Config) { c.Leader = following{conn: serveLeader(t, leader.ACL)} })
	mgmt, _, err := follower.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	m := &structs.ACLAuthMethod{Name: "ci", Type: "JWT", Config: &structs.ACLAuthMethodConfig{
		JWTValidationPubKeys: []string{string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))},
		SigningAlgs:          []string{"ES256"}, ClaimMappings: map[string]string{"sub": "sub"}}}
	if _, _, err := follower.CreateACLAuthMethods(ctx, mgmt.SecretID, []*structs.ACLAuthMethod{m}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := follower.UpsertACLBindingRules(ctx, mgmt.SecretID, []*structs.ACLBindingRule{
		{AuthMethod: "ci", BindType: "management", Selector: `value.sub == "admin"`}}); err != nil {
		t.Fatal(err)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(sub string) string {
		s, err := jwt.Signed(sig).Claims(jwt.Claims{Subject: sub, Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tok, _, err := follower.Login(ctx, "ci", sign("admin"))
	if err != nil || !tok.IsManagement() {
		t.Fatalf("forwarded login: %+v, %v", tok, err)
	}
	if got, _ := leader.State().ACLTokenByAccessorID(nil, tok.AccessorID); got == nil {
		t.Fatal("the login token is not in the leader's state")
	}
	for _, tc := range []struct {
		name string
		call func() error
		kind error
	}{
		{"unknown method", func() error { _, _, err := follower.Login(ctx, "nosuch", sign("admin")); return err }, structs.ErrNotFound},
		{"no binding", func() error { _, _, err := follower.Login(ctx, "ci", sign("user")); return err }, structs.ErrPermissionDenied},
		{"bad token", func() error { _, _, err := follower.Login(ctx, "ci", "x.y.z"); return err }, structs.ErrPermissionDenied},
		{"method write without management", func() error {
			_, _, err := follower.CreateACLAuthMethods(ctx, "", []*structs.ACLAuthMethod{m})
			return err
		}, structs.ErrPermissionDenied},
		{"method created twice", func() error {
			_, _, err := follower.CreateACLAuthMethods(ctx, mgmt.SecretID, []*structs.ACLAuthMethod{m})
			return err
		}, structs.ErrInvalid},
		{"delete a missing rule", func() error {
			_, err := follower.DeleteACLBindingRules(ctx, mgmt.SecretID, []string{"5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b"})
			return err
		}, structs.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want kind %v", err, tc.kind)
			}
		})
	}
}
