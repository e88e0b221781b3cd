package structs

import (
	"fmt"
	"strings"
	"time"
)

// The jobspec blocks of Nomad's integrations (Vault, Consul, Consul
// Connect, workload identity) and of its multi-region federation, in
// Nomad's JSON shape. The parser keeps every one of them as Nomad parses
// it, so a parsed job compares equal to Nomad's; a job that uses one is
// refused when it is registered (validateIntegrations), naming the block
// and what to do instead, because drover has none of these integrations.
//
// The hcl tags name each field's attribute or block in a job file; the
// parser decodes these blocks by them (core/jobspec/integrations.go).

// Vault is a task's vault block (a group's or the job's is copied to each
// of its tasks that has none, as Nomad's parser does).
type Vault struct {
	Policies     []string `codec:",omitempty" hcl:"policies" bound:"id"`
	Namespace    string   `codec:",omitempty" hcl:"namespace" bound:"id"`
	Role         string   `codec:",omitempty" hcl:"role" bound:"id"`
	Cluster      string   `codec:",omitempty" hcl:"cluster" bound:"id"`
	Env          bool     `codec:",omitempty" hcl:"env"`
	DisableFile  bool     `codec:",omitempty" hcl:"disable_file"`
	ChangeMode   string   `codec:",omitempty" hcl:"change_mode" bound:"id"`
	ChangeSignal string   `codec:",omitempty" hcl:"change_signal" bound:"id"`
}

// NewVault is a vault block before its attributes: Nomad's defaults.
func NewVault() *Vault {
	return &Vault{Env: true, ChangeMode: VaultChangeModeRestart, ChangeSignal: "SIGHUP"}
}

// VaultChangeModeRestart is Nomad's default change_mode of a vault block.
const VaultChangeModeRestart = "restart"

// Consul is a group's or a task's consul block: the Consul namespace,
// cluster and admin partition of its Consul services and templates.
type Consul struct {
	Namespace string `codec:",omitempty" hcl:"namespace" bound:"id"`
	Cluster   string `codec:",omitempty" hcl:"cluster" bound:"id"`
	Partition string `codec:",omitempty" hcl:"partition" bound:"id"`
}

// WorkloadIdentity is a task's (or a service's) identity block: a signed
// token of the workload, given to the task in its environment or a file.
type WorkloadIdentity struct {
	Name         string        `codec:",omitempty" hcl:"name" bound:"id"`
	Audience     []string      `codec:",omitempty" hcl:"aud"`
	ChangeMode   string        `codec:",omitempty" hcl:"change_mode" bound:"id"`
	ChangeSignal string        `codec:",omitempty" hcl:"change_signal" bound:"id"`
	Env          bool          `codec:",omitempty" hcl:"env"`
	File         bool          `codec:",omitempty" hcl:"file"`
	ServiceName  string        `codec:",omitempty" hcl:"service_name" bound:"id"`
	TTL          time.Duration `codec:",omitempty" hcl:"ttl"`
}

// WorkloadIdentityDefaultName is the name of a task's default identity
// (its identity block that names none).
const WorkloadIdentityDefaultName = "default"

// Multiregion is a job's multiregion block (Nomad Enterprise's federated
// deployments, parsed by Nomad's open-source CLI as well).
type Multiregion struct {
	Strategy *MultiregionStrategy `codec:",omitempty" hcl:"strategy,block"`
	Regions  []*MultiregionRegion `codec:",omitempty" hcl:"region,blocks"`
}

// MultiregionStrategy is a multiregion block's strategy block.
type MultiregionStrategy struct {
	MaxParallel int    `codec:",omitempty" hcl:"max_parallel"`
	OnFailure   string `codec:",omitempty" hcl:"on_failure" bound:"id"`
}

// MultiregionRegion is a multiregion block's `region "name" { … }`.
type MultiregionRegion struct {
	Name        string            `codec:",omitempty" hcl:"name,label" bound:"id"`
	Count       int               `codec:",omitempty" hcl:"count"`
	Datacenters []string          `codec:",omitempty" hcl:"datacenters" bound:"id"`
	NodePool    string            `codec:",omitempty" hcl:"node_pool" bound:"id"`
	Meta        map[string]string `codec:",omitempty" hcl:"meta,map"`
}

// ConsulConnect is a service's connect block (Consul service mesh).
type ConsulConnect struct {
	Native         bool                  `codec:",omitempty" hcl:"native"`
	Gateway        *ConsulGateway        `codec:",omitempty" hcl:"gateway,block"`
	SidecarService *ConsulSidecarService `codec:",omitempty" hcl:"sidecar_service,block"`
	SidecarTask    *SidecarTask          `codec:",omitempty" hcl:"sidecar_task,block"`
}

// ConsulSidecarService is a connect block's sidecar_service.
type ConsulSidecarService struct {
	Tags                   []string          `codec:",omitempty" hcl:"tags"`
	Port                   string            `codec:",omitempty" hcl:"port" bound:"id"`
	Proxy                  *ConsulProxy      `codec:",omitempty" hcl:"proxy,block"`
	DisableDefaultTCPCheck bool              `codec:",omitempty" hcl:"disable_default_tcp_check"`
	Meta                   map[string]string `codec:",omitempty" hcl:"meta,map"`
}

// ConsulProxy is a sidecar_service's proxy block.
type ConsulProxy struct {
	LocalServiceAddress string              `codec:",omitempty" hcl:"local_service_address"`
	LocalServicePort    int                 `codec:",omitempty" hcl:"local_service_port"`
	Expose              *ConsulExposeConfig `codec:",omitempty" hcl:"expose,block"`
	Upstreams           []*ConsulUpstream   `codec:",omitempty" hcl:"upstreams,blocks"`
	Config              map[string]any      `codec:",omitempty" hcl:"config,any" bound:"blob"`
}

// ConsulExposeConfig is a proxy's expose block.
type ConsulExposeConfig struct {
	Paths []*ConsulExposePath `codec:",omitempty" hcl:"path,blocks"`
}

// ConsulExposePath is one path of an expose block.
type ConsulExposePath struct {
	Path          string `codec:",omitempty" hcl:"path"`
	Protocol      string `codec:",omitempty" hcl:"protocol" bound:"id"`
	LocalPathPort int    `codec:",omitempty" hcl:"local_path_port"`
	ListenerPort  string `codec:",omitempty" hcl:"listener_port" bound:"id"`
}

// ConsulUpstream is a proxy's upstreams block.
type ConsulUpstream struct {
	DestinationName      string             `codec:",omitempty" hcl:"destination_name" bound:"id"`
	DestinationNamespace string             `codec:",omitempty" hcl:"destination_namespace" bound:"id"`
	DestinationPeer      string             `codec:",omitempty" hcl:"destination_peer" bound:"id"`
	DestinationType      string             `codec:",omitempty" hcl:"destination_type" bound:"id"`
	LocalBindPort        int                `codec:",omitempty" hcl:"local_bind_port"`
	Datacenter           string             `codec:",omitempty" hcl:"datacenter" bound:"id"`
	LocalBindAddress     string             `codec:",omitempty" hcl:"local_bind_address"`
	LocalBindSocketPath  string             `codec:",omitempty" hcl:"local_bind_socket_path"`
	LocalBindSocketMode  string             `codec:",omitempty" hcl:"local_bind_socket_mode" bound:"id"`
	MeshGateway          *ConsulMeshGateway `codec:",omitempty" hcl:"mesh_gateway,block"`
	Config               map[string]any     `codec:",omitempty" hcl:"config,any" bound:"blob"`
}

// ConsulMeshGateway is an upstream's mesh_gateway block.
type ConsulMeshGateway struct {
	Mode string `codec:",omitempty" hcl:"mode" bound:"id"`
}

// SidecarTask is a connect block's sidecar_task: what Nomad changes of
// the Envoy task it injects.
type SidecarTask struct {
	Name          string            `codec:",omitempty" hcl:"name" bound:"id"`
	Driver        string            `codec:",omitempty" hcl:"driver" bound:"id"`
	User          string            `codec:",omitempty" hcl:"user" bound:"id"`
	Config        map[string]any    `codec:",omitempty" hcl:"config,taskconfig" bound:"blob"`
	Env           map[string]string `codec:",omitempty" hcl:"env,map"`
	Resources     *Resources        `codec:",omitempty" hcl:"resources,resources"`
	Meta          map[string]string `codec:",omitempty" hcl:"meta,map"`
	KillTimeout   *time.Duration    `codec:",omitempty" hcl:"kill_timeout"`
	LogConfig     *LogConfig        `codec:",omitempty" hcl:"logs,logs"`
	ShutdownDelay *time.Duration    `codec:",omitempty" hcl:"shutdown_delay"`
	KillSignal    string            `codec:",omitempty" hcl:"kill_signal" bound:"id"`
}

// ConsulGateway is a connect block's gateway block.
type ConsulGateway struct {
	Proxy       *ConsulGatewayProxy           `codec:",omitempty" hcl:"proxy,block"`
	Ingress     *ConsulIngressConfigEntry     `codec:",omitempty" hcl:"ingress,block"`
	Terminating *ConsulTerminatingConfigEntry `codec:",omitempty" hcl:"terminating,block"`
	Mesh        *ConsulMeshConfigEntry        `codec:",omitempty" hcl:"mesh,block"`
}

// ConsulGatewayProxy is a gateway's proxy block.
type ConsulGatewayProxy struct {
	ConnectTimeout                  *time.Duration                       `codec:",omitempty" hcl:"connect_timeout"`
	EnvoyGatewayBindTaggedAddresses bool                                 `codec:",omitempty" hcl:"envoy_gateway_bind_tagged_addresses"`
	EnvoyGatewayBindAddresses       map[string]*ConsulGatewayBindAddress `codec:",omitempty" hcl:"envoy_gateway_bind_addresses,labelled"`
	EnvoyGatewayNoDefaultBind       bool                                 `codec:",omitempty" hcl:"envoy_gateway_no_default_bind"`
	EnvoyDNSDiscoveryType           string                               `codec:",omitempty" hcl:"envoy_dns_discovery_type" bound:"id"`
	Config                          map[string]any                       `codec:",omitempty" hcl:"config,any" bound:"blob"`
}

// ConsulGatewayBindAddress is one `envoy_gateway_bind_addresses "name"`.
type ConsulGatewayBindAddress struct {
	Address string `codec:",omitempty" hcl:"address"`
	Port    int    `codec:",omitempty" hcl:"port"`
}

// ConsulIngressConfigEntry is a gateway's ingress block.
type ConsulIngressConfigEntry struct {
	TLS       *ConsulGatewayTLSConfig  `codec:",omitempty" hcl:"tls,block"`
	Listeners []*ConsulIngressListener `codec:",omitempty" hcl:"listener,blocks"`
}

// ConsulGatewayTLSConfig is an ingress block's tls block.
type ConsulGatewayTLSConfig struct {
	Enabled       bool     `codec:",omitempty" hcl:"enabled"`
	TLSMinVersion string   `codec:",omitempty" hcl:"tls_min_version" bound:"id"`
	TLSMaxVersion string   `codec:",omitempty" hcl:"tls_max_version" bound:"id"`
	CipherSuites  []string `codec:",omitempty" hcl:"cipher_suites" bound:"id"`
}

// ConsulIngressListener is an ingress block's listener.
type ConsulIngressListener struct {
	Port     int                     `codec:",omitempty" hcl:"port"`
	Protocol string                  `codec:",omitempty" hcl:"protocol" bound:"id"`
	Services []*ConsulIngressService `codec:",omitempty" hcl:"service,blocks"`
}

// ConsulIngressService is a listener's service block.
type ConsulIngressService struct {
	Name  string   `codec:",omitempty" hcl:"name" bound:"id"`
	Hosts []string `codec:",omitempty" hcl:"hosts"`
}

// ConsulTerminatingConfigEntry is a gateway's terminating block.
type ConsulTerminatingConfigEntry struct {
	Services []*ConsulLinkedService `codec:",omitempty" hcl:"service,blocks"`
}

// ConsulLinkedService is a terminating gateway's service block.
type ConsulLinkedService struct {
	Name     string `codec:",omitempty" hcl:"name" bound:"id"`
	CAFile   string `codec:",omitempty" hcl:"ca_file"`
	CertFile string `codec:",omitempty" hcl:"cert_file"`
	KeyFile  string `codec:",omitempty" hcl:"key_file"`
	SNI      string `codec:",omitempty" hcl:"sni"`
}

// ConsulMeshConfigEntry is a gateway's mesh block (it has no attributes).
type ConsulMeshConfigEntry struct{}

// ServiceWeights is a Consul service's weights block (its DNS weights).
type ServiceWeights struct {
	Passing int `codec:",omitempty" hcl:"passing"`
	Warning int `codec:",omitempty" hcl:"warning"`
}

// What a user of each integration block can do instead, in drover.
const (
	insteadVault    = "give the task its secrets through its env block, a template, or drover's variables"
	insteadConsul   = "use provider = \"nomad\" services, which drover registers in its own catalogue, and remove the consul block"
	insteadConnect  = "use provider = \"nomad\" services and reach them at the address and port their registration gives"
	insteadIdentity = "remove the identity block: drover gives tasks no workload identity token"
	insteadRegion   = "remove the multiregion block and register the job in each region"
)

// validateIntegrations refuses the job-level integration blocks and
// attributes, each by name with what to do instead.
func (j *Job) validateIntegrations(l *errList) {
	if j.Multiregion != nil {
		l.add("multiregion: not supported: drover has no multi-region federation; %s", insteadRegion)
	}
	if j.VaultToken != "" {
		l.add("vault_token: not supported: it is a token for Vault, and drover has no Vault integration; remove it")
	}
	if j.ConsulToken != "" {
		l.add("consul_token: not supported: it is a token for Consul, and drover has no Consul integration; remove it")
	}
}

// asksForConsul reports whether a consul block asks for anything: Nomad
// gives every group an empty one ({"Namespace": ""}), which a job read
// back from Nomad's API carries, and the "default" cluster is Nomad's
// default too.
func (c *Consul) asksForConsul() bool {
	return c != nil && (c.Namespace != "" || c.Partition != "" || (c.Cluster != "" && c.Cluster != "default"))
}

// asksForToken reports whether a task's identity gives the task its
// token (env or file): an identity that does neither changes nothing for
// the task, as a job read back from Nomad's API carries one.
func (w *WorkloadIdentity) asksForToken() bool {
	return w != nil && (w.Env || w.File)
}

// validateIntegrations refuses a group's consul block.
func (tg *TaskGroup) validateIntegrations(l *errList, where string) {
	if tg.Consul.asksForConsul() {
		l.add("%s: consul: not supported: drover has no Consul integration; %s", where, insteadConsul)
	}
}

// validateIntegrations refuses a task's vault, consul and identity
// blocks and its Consul Connect kind.
func (t *Task) validateIntegrations(l *errList, where string) {
	for _, s := range t.ScalingPolicies {
		typ := ""
		if s != nil {
			typ = s.Type
		}
		l.add("%s: scaling %q: not supported: it sizes the task's resources with Nomad Enterprise's dynamic application sizing, which drover does not have; remove it", where, strings.TrimPrefix(typ, "vertical_"))
	}
	if t.Vault != nil {
		l.add("%s: vault: not supported: drover has no Vault integration; %s", where, insteadVault)
	}
	if t.Consul.asksForConsul() {
		l.add("%s: consul: not supported: drover has no Consul integration; %s", where, insteadConsul)
	}
	if t.Identity.asksForToken() {
		l.add("%s: identity: not supported: %s", where, insteadIdentity)
	}
	for i, id := range t.Identities {
		name := ""
		if id != nil {
			name = id.Name
		}
		l.add("%s: identity %s: not supported: %s", where, identityName(i, name), insteadIdentity)
	}
}

func identityName(i int, name string) string {
	if name == "" {
		return fmt.Sprint(i + 1)
	}
	return fmt.Sprintf("%q", name)
}

// validateIntegrations refuses a service's Consul-only blocks and
// attributes.
func (s *Service) validateIntegrations(l *errList, w string) {
	if s.Connect != nil {
		l.add("%s: connect: not supported: it needs Consul Connect, and drover has no Consul integration; %s", w, insteadConnect)
	}
	if s.Identity != nil {
		l.add("%s: identity: not supported: %s", w, insteadIdentity)
	}
	if len(s.TaggedAddresses) > 0 {
		l.add("%s: tagged_addresses: not supported: tagged addresses are Consul's; remove it", w)
	}
	if s.Cluster != "" {
		l.add("%s: cluster: not supported: it names a Consul cluster; remove it", w)
	}
	if s.Kind != "" {
		l.add("%s: kind: not supported: it is a Consul service kind; remove it", w)
	}
	if s.Weights != nil {
		l.add("%s: weights: not supported: weights are Consul's DNS weights; remove it", w)
	}
}
