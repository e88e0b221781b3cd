// Package keyring seals Nomad Variables at rest: AES-256-GCM root keys,
// their wrapping for replication through Raft, and the sealing of a
// variable's items under a root key. It is pure: no state, no I/O but the
// random source.
//
// A variable's items are sealed as JSON with a fresh 96-bit nonce; the
// namespace and path are the additional data, so a sealed blob moved to
// another variable does not open. A root key's 32 bytes are sealed under
// a key-encryption key (KEK) that travels beside it in the same record
// ("aead" wrapping, as Nomad's default provider): see docs/variables.md
// for what that does and does not protect.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// KeySize is a root key's and a KEK's size: AES-256.
const KeySize = 32

// WrapAEAD names the wrapping with a KEK stored beside the key.
const WrapAEAD = "aead"

func gcm(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("keyring: key of %d bytes, want %d", len(key), KeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func seal(key, plain, ad []byte) ([]byte, error) {
	a, err := gcm(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return a.Seal(nonce, nonce, plain, ad), nil
}

func open(key, data, ad []byte) ([]byte, error) {
	a, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if len(data) < a.NonceSize()+a.Overhead() {
		return nil, fmt.Errorf("keyring: sealed data of %d bytes is too short", len(data))
	}
	return a.Open(nil, data[:a.NonceSize()], data[a.NonceSize():], ad)
}

// NewRootKey makes a root key (a new UUID, fresh material) created at
// createTime (unix nanoseconds), wrapped for storage.
func NewRootKey(createTime int64) (*structs.RootKey, error) {
	material := make([]byte, KeySize)
	kek := make([]byte, KeySize)
	if _, err := rand.Read(material); err != nil {
		return nil, err
	}
	if _, err := rand.Read(kek); err != nil {
		return nil, err
	}
	id := uuid.NewString()
	wrapped, err := seal(kek, material, []byte(id))
	if err != nil {
		return nil, err
	}
	return &structs.RootKey{
		Meta: &structs.RootKeyMeta{KeyID: id, Algorithm: structs.RootKeyAlgorithmAES256GCM,
			CreateTime: createTime, State: structs.RootKeyStateInactive},
		WrapProvider: WrapAEAD, KEK: kek, WrappedKey: wrapped,
	}, nil
}

// Unwrap returns a root key's material.
func Unwrap(k *structs.RootKey) ([]byte, error) {
	if k == nil || k.Meta == nil {
		return nil, fmt.Errorf("keyring: no root key")
	}
	if k.WrapProvider != WrapAEAD {
		return nil, fmt.Errorf("keyring: root key %s: unknown wrap provider %q", k.Meta.KeyID, k.WrapProvider)
	}
	m, err := open(k.KEK, k.WrappedKey, []byte(k.Meta.KeyID))
	if err != nil {
		return nil, fmt.Errorf("keyring: root key %s does not unwrap: %w", k.Meta.KeyID, err)
	}
	return m, nil
}

func varAD(keyID, ns, path string) []byte {
	// Lengths first: no two (keyID, ns, path) give the same bytes.
	return fmt.Appendf(nil, "%d:%s%d:%s%d:%s", len(keyID), keyID, len(ns), ns, len(path), path)
}

// SealItems seals items for the variable at ns/path under the root key
// keyID with material key.
func SealItems(key []byte, keyID, ns, path string, items structs.VariableItems) ([]byte, error) {
	plain, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	return seal(key, plain, varAD(keyID, ns, path))
}

// OpenItems opens what SealItems sealed.
func OpenItems(key []byte, keyID, ns, path string, data []byte) (structs.VariableItems, error) {
	plain, err := open(key, data, varAD(keyID, ns, path))
	if err != nil {
		return nil, fmt.Errorf("keyring: variable %s/%s does not open under key %s: %w", ns, path, keyID, err)
	}
	var items structs.VariableItems
	if err := json.Unmarshal(plain, &items); err != nil {
		return nil, err
	}
	return items, nil
}

// Cache keeps unwrapped root keys by ID. A key's material never changes,
// so an entry is valid for as long as the key exists.
type Cache struct {
	mu   sync.Mutex
	keys map[string][]byte
}

// Material returns k's material, unwrapping it once.
func (c *Cache) Material(k *structs.RootKey) ([]byte, error) {
	if k == nil || k.Meta == nil {
		return nil, fmt.Errorf("keyring: no root key")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.keys[k.Meta.KeyID]; ok {
		return m, nil
	}
	m, err := Unwrap(k)
	if err != nil {
		return nil, err
	}
	if c.keys == nil {
		c.keys = map[string][]byte{}
	}
	c.keys[k.Meta.KeyID] = m
	return m, nil
}
