package client

import "maps"

// defaultNodeMeta is the node metadata every Nomad client sets unless its
// agent config's client.meta sets the key itself: the images, log level
// and concurrency of the Envoy proxies Nomad's Consul service mesh runs
// (jobs read them as ${meta.connect.sidecar_image}, ...). drover runs no
// such proxy; it sets the keys so that job files and tools reading them
// find Nomad's values.
var defaultNodeMeta = map[string]string{
	"connect.sidecar_image":     "envoyproxy/envoy:v${NOMAD_envoy_version}",
	"connect.gateway_image":     "envoyproxy/envoy:v${NOMAD_envoy_version}",
	"connect.log_level":         "info",
	"connect.proxy_concurrency": "1",
}

// withDefaultMeta returns the static node metadata: meta (the agent's
// client.meta) over defaultNodeMeta. meta is not changed.
func withDefaultMeta(meta map[string]string) map[string]string {
	out := maps.Clone(defaultNodeMeta)
	maps.Copy(out, meta)
	return out
}
