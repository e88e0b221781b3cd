package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
)

// Bounds of the dynamic node metadata (/v1/client/metadata): it reaches
// the servers' Raft log with every node registration.
const (
	MaxMetaKeys       = 256
	MaxMetaKeyBytes   = 128
	MaxMetaValueBytes = 1024
	// metaFile holds the dynamic metadata in the client's state dir.
	metaFile = "node-meta.json"
)

// validMetaKey: letters, digits, '_', '-' and '.', so that a job can
// read it as ${meta.<key>}.
func validMetaKey(k string) error {
	if k == "" {
		return structs.NewError(structs.ErrInvalid, "Meta: a key must not be empty")
	}
	if len(k) > MaxMetaKeyBytes {
		return structs.NewError(structs.ErrInvalid, "Meta[%q]: a key is at most %d bytes", k[:32]+"...", MaxMetaKeyBytes)
	}
	for _, r := range k {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return structs.NewError(structs.ErrInvalid, "Meta[%q]: a key may hold only letters, digits, '_', '-' and '.'", k)
		}
	}
	return nil
}

// NodeMeta is the node's metadata: static (the agent's client.meta),
// dynamic (set through the API) and the two merged, as the node carries it.
func (c *Client) NodeMeta() *clientapi.NodeMetaResponse {
	c.api.mu.Lock()
	dyn := maps.Clone(c.api.dynMeta)
	c.api.mu.Unlock()
	static := maps.Clone(c.cfg.Meta)
	if static == nil {
		static = map[string]string{}
	}
	if dyn == nil {
		dyn = map[string]*string{}
	}
	return &clientapi.NodeMetaResponse{Meta: mergeMeta(static, dyn), Dynamic: dyn, Static: static}
}

func mergeMeta(static map[string]string, dyn map[string]*string) map[string]string {
	out := maps.Clone(static)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range dyn {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

// ApplyNodeMeta sets (a value) or removes (nil) dynamic metadata keys
// (POST /v1/client/metadata; `nomad node meta apply`), persists the
// result in the client's state dir and registers the node again with it.
// A bad key or value, or too many keys, is structs.ErrInvalid and changes
// nothing.
func (c *Client) ApplyNodeMeta(update map[string]*string) (*clientapi.NodeMetaResponse, error) {
	if len(update) == 0 {
		return nil, structs.NewError(structs.ErrInvalid, "Meta: must set or unset at least one key")
	}
	keys := make([]string, 0, len(update))
	for k := range update {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := validMetaKey(k); err != nil {
			return nil, err
		}
		if v := update[k]; v != nil && len(*v) > MaxMetaValueBytes {
			return nil, structs.NewError(structs.ErrInvalid, "Meta[%q]: a value is at most %d bytes", k, MaxMetaValueBytes)
		}
	}
	c.api.mu.Lock()
	next := maps.Clone(c.api.dynMeta)
	if next == nil {
		next = map[string]*string{}
	}
	for k, v := range update {
		_, static := c.cfg.Meta[k]
		if v == nil && !static {
			delete(next, k) // nothing left to hide
			continue
		}
		next[k] = v
	}
	if len(next) > MaxMetaKeys {
		c.api.mu.Unlock()
		return nil, structs.NewError(structs.ErrInvalid, "Meta: at most %d dynamic keys, this update makes %d", MaxMetaKeys, len(next))
	}
	if err := c.saveDynamicMeta(next); err != nil {
		c.api.mu.Unlock()
		return nil, err
	}
	c.api.dynMeta = next
	merged := mergeMeta(c.cfg.Meta, next)
	c.api.mu.Unlock()

	c.nodeMu.Lock()
	n := c.node.Copy()
	n.Meta = merged
	n.ComputedClass = computedClass(n)
	c.node = n
	c.nodeMu.Unlock()
	select {
	case c.nodeChanged <- struct{}{}:
	default:
	}
	return c.NodeMeta(), nil
}

// saveDynamicMeta writes the dynamic metadata to the state dir, whole or
// not at all.
func (c *Client) saveDynamicMeta(m map[string]*string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	path := filepath.Join(c.cfg.StateDir, metaFile)
	tmp, err := os.CreateTemp(c.cfg.StateDir, metaFile+".tmp*")
	if err != nil {
		return fmt.Errorf("persist node metadata: %w", err)
	}
	_, werr := tmp.Write(b)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("persist node metadata: %w", werr)
	}
	return nil
}

// loadDynamicMeta reads the dynamic metadata an earlier client process
// persisted and merges it into the node (from New, before anything runs).
// A file that cannot be read is logged and ignored: the node keeps its
// static metadata.
func (c *Client) loadDynamicMeta() {
	b, err := os.ReadFile(filepath.Join(c.cfg.StateDir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var m map[string]*string
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil && len(m) > MaxMetaKeys {
		err = fmt.Errorf("%d keys, over the limit of %d", len(m), MaxMetaKeys)
	}
	for k, v := range m {
		if err != nil {
			break
		}
		if err = validMetaKey(k); err == nil && v != nil && len(*v) > MaxMetaValueBytes {
			err = fmt.Errorf("Meta[%q]: value over %d bytes", k, MaxMetaValueBytes)
		}
	}
	if err != nil {
		c.logger.Warn("ignoring the persisted dynamic node metadata", "file", metaFile, "error", err)
		return
	}
	c.api.dynMeta = m
	c.node.Meta = mergeMeta(c.cfg.Meta, m)
	c.node.ComputedClass = computedClass(c.node)
}
