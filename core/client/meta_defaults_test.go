package client

import (
	"maps"
	"testing"
)

// Nomad's default node meta (connect.*) is set unless client.meta sets
// the key; it is static meta, listed as such by NodeMeta, and the config's
// map is left as it was.
func TestDefaultNodeMeta(t *testing.T) {
	for name, tc := range map[string]struct {
		meta map[string]string
		want map[string]string
	}{
		"none": {nil, defaultNodeMeta},
		"own key kept": {map[string]string{"rack": "r1"}, map[string]string{
			"rack": "r1", "connect.sidecar_image": "envoyproxy/envoy:v${NOMAD_envoy_version}",
			"connect.gateway_image": "envoyproxy/envoy:v${NOMAD_envoy_version}", "connect.log_level": "info",
			"connect.proxy_concurrency": "1",
		}},
		"default overridden": {map[string]string{"connect.log_level": "debug"}, map[string]string{
			"connect.sidecar_image": "envoyproxy/envoy:v${NOMAD_envoy_version}",
			"connect.gateway_image": "envoyproxy/envoy:v${NOMAD_envoy_version}", "connect.log_level": "debug",
			"connect.proxy_concurrency": "1",
		}},
	} {
		t.Run(name, func(t *testing.T) {
			before := maps.Clone(tc.meta)
			got := withDefaultMeta(tc.meta)
			if !maps.Equal(got, tc.want) {
				t.Errorf("withDefaultMeta(%v) = %v, want %v", tc.meta, got, tc.want)
			}
			if !maps.Equal(tc.meta, before) {
				t.Errorf("the config's meta changed: %v, was %v", tc.meta, before)
			}
		})
	}

	c, err := New(Config{StateDir: t.TempDir(), Server: newFakeServer(), Meta: map[string]string{"connect.log_level": "warn"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	n := c.Node()
	if n.Meta["connect.proxy_concurrency"] != "1" || n.Meta["connect.log_level"] != "warn" {
		t.Errorf("node meta = %v; want the defaults under the config's keys", n.Meta)
	}
	m := c.NodeMeta()
	if !maps.Equal(m.Static, n.Meta) || len(m.Dynamic) != 0 || !maps.Equal(m.Meta, n.Meta) {
		t.Errorf("NodeMeta = %+v; want the node's meta, all static", m)
	}
}
