package keyring

import (
	"bytes"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestRootKeyWrapAndSeal(t *testing.T) {
	k, err := NewRootKey(42)
	if err != nil {
		t.Fatal(err)
	}
	if k.Meta.Algorithm != structs.RootKeyAlgorithmAES256GCM || len(k.KEK) != KeySize || k.Meta.CreateTime != 42 {
		t.Fatalf("root key %+v", k.Meta)
	}
	m, err := Unwrap(k)
	if err != nil || len(m) != KeySize {
		t.Fatalf("unwrap: %d bytes, %v", len(m), err)
	}
	if bytes.Contains(k.WrappedKey, m) {
		t.Fatal("the wrapped key holds the material in the clear")
	}
	items := structs.VariableItems{"password": "hunter2-plaintext"}
	data, err := SealItems(m, k.Meta.KeyID, "default", "a/b", items)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("hunter2-plaintext")) {
		t.Fatal("sealed items hold the value in the clear")
	}
	got, err := OpenItems(m, k.Meta.KeyID, "default", "a/b", data)
	if err != nil || got["password"] != "hunter2-plaintext" {
		t.Fatalf("open: %v, %v", got, err)
	}

	other, _ := NewRootKey(1)
	om, _ := Unwrap(other)
	tamper := append([]byte(nil), data...)
	tamper[len(tamper)-1] ^= 1
	cases := []struct {
		name   string
		key    []byte
		id, ns string
		path   string
		data   []byte
	}{
		{"other path", m, k.Meta.KeyID, "default", "a/c", data},
		{"other namespace", m, k.Meta.KeyID, "prod", "a/b", data},
		{"other key", om, k.Meta.KeyID, "default", "a/b", data},
		{"other key id", m, other.Meta.KeyID, "default", "a/b", data},
		{"tampered", m, k.Meta.KeyID, "default", "a/b", tamper},
		{"truncated", m, k.Meta.KeyID, "default", "a/b", data[:5]},
		{"short key", m[:16], k.Meta.KeyID, "default", "a/b", data},
	}
	for _, c := range cases {
		if _, err := OpenItems(c.key, c.id, c.ns, c.path, c.data); err == nil {
			t.Errorf("%s: opened", c.name)
		}
	}

	bad := k.Copy()
	bad.KEK[0] ^= 1
	if _, err := Unwrap(bad); err == nil {
		t.Error("unwrap with a wrong KEK succeeded")
	}
	bad = k.Copy()
	bad.WrapProvider = "kms"
	if _, err := Unwrap(bad); err == nil {
		t.Error("unwrap with an unknown provider succeeded")
	}

	var c Cache
	m1, err := c.Material(k)
	if err != nil || !bytes.Equal(m1, m) {
		t.Fatalf("cache: %v", err)
	}
}
