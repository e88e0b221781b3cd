package structs

import "time"

// Service is a group's or a task's service block with provider "nomad":
// Nomad's native service discovery. The client registers one
// ServiceRegistration per service and allocation once the allocation's
// tasks run, runs the service's checks, and deregisters it when the
// allocation stops. Fields are Nomad's API names.
type Service struct {
	Name string `codec:",omitempty" bound:"id"`
	// TaskName is the task a group service's checks run in (script
	// checks); a task service's own task.
	TaskName string `codec:",omitempty" bound:"id"`
	// PortLabel names a port of the group's network block (or is a
	// number). Empty: the service has no port (port 0).
	PortLabel string `codec:",omitempty" bound:"id"`
	// AddressMode is "auto", "host", "alloc" or "driver"; drover
	// registers the host address in every mode but "alloc" and
	// "driver", which are refused until they mean something different.
	AddressMode string   `codec:",omitempty" bound:"id"`
	Address     string   `codec:",omitempty"`
	Tags        []string `codec:",omitempty"`
	CanaryTags  []string `codec:",omitempty"`
	// EnableTagOverride is a Consul setting, kept as written.
	EnableTagOverride bool              `codec:",omitempty"`
	Checks            []*ServiceCheck   `codec:",omitempty"`
	Meta              map[string]string `codec:",omitempty"`
	CanaryMeta        map[string]string `codec:",omitempty"`
	// Provider is "nomad"; "consul" is refused at submit. Empty (a
	// block naming none) is the cluster's default, which the server
	// resolves at registration (server.default_service_provider).
	Provider string `codec:",omitempty" bound:"id"`
	// OnUpdate is "require_healthy", "ignore_warnings" or "ignore".
	OnUpdate string `codec:",omitempty" bound:"id"`
	// Connect, Identity, TaggedAddresses, Cluster, Kind and Weights are
	// Consul's, parsed as Nomad parses them and refused at registration
	// (job_integrations.go).
	Connect         *ConsulConnect    `codec:",omitempty"`
	Identity        *WorkloadIdentity `codec:",omitempty"`
	TaggedAddresses map[string]string `codec:",omitempty"`
	Cluster         string            `codec:",omitempty" bound:"id"`
	Kind            string            `codec:",omitempty" bound:"id"`
	Weights         *ServiceWeights   `codec:",omitempty"`
	// CheckRestart is the service's check_restart, which Canonicalize
	// lays under each check's own and then clears: the checks hold it.
	CheckRestart *CheckRestart `codec:",omitempty"`
}

// ServiceCheck is a service's check block: http, tcp or script, run by
// the client on the allocation's node.
type ServiceCheck struct {
	Name string `codec:",omitempty"`
	// Type is "http", "tcp" or "script" ("grpc" is refused).
	Type string `codec:",omitempty" bound:"id"`
	// Command and Args of a script check, run in TaskName's task.
	Command string   `codec:",omitempty"`
	Args    []string `codec:",omitempty"`
	// Path, Method, Header, Body and Protocol ("http" or "https") of an
	// http check.
	Path      string              `codec:",omitempty"`
	Method    string              `codec:",omitempty" bound:"id"`
	Header    map[string][]string `codec:",omitempty"`
	Body      string              `codec:",omitempty"`
	Protocol  string              `codec:",omitempty" bound:"id"`
	PortLabel string              `codec:",omitempty" bound:"id"`
	// AddressMode as Service.AddressMode.
	AddressMode   string        `codec:",omitempty" bound:"id"`
	Interval      time.Duration `codec:",omitempty"`
	Timeout       time.Duration `codec:",omitempty"`
	InitialStatus string        `codec:",omitempty" bound:"id"`
	TLSServerName string        `codec:",omitempty"`
	TLSSkipVerify bool          `codec:",omitempty"`
	TaskName      string        `codec:",omitempty" bound:"id"`
	// SuccessBeforePassing and FailuresBeforeCritical: consecutive
	// results before the status flips.
	SuccessBeforePassing   int `codec:",omitempty"`
	FailuresBeforeCritical int `codec:",omitempty"`
	FailuresBeforeWarning  int `codec:",omitempty"`
	// OnUpdate as Service.OnUpdate.
	OnUpdate string `codec:",omitempty" bound:"id"`
	// CheckRestart restarts the check's task after consecutive failures.
	CheckRestart *CheckRestart `codec:",omitempty"`
	// GRPCService is a grpc check's; kept so that a grpc check sent as
	// JSON is refused by name.
	GRPCService string `codec:",omitempty"`
	// Advertise is Nomad's address a check advertises; drover's checks
	// run against the service's address, so a check setting it is refused.
	Advertise string `codec:",omitempty"`
	// GRPCUseTLS, Expose and Notes are Consul's (grpc checks, Connect's
	// expose, a check's notes): kept as parsed, refused at registration.
	GRPCUseTLS bool   `codec:",omitempty"`
	Expose     bool   `codec:",omitempty"`
	Notes      string `codec:",omitempty"`
}

// DefaultCheckRestartGrace is Nomad's check_restart grace when a block
// gives none.
const DefaultCheckRestartGrace = time.Second

// CheckRestart is a check's (or its service's) check_restart block: the
// task is restarted after Limit consecutive failed checks (0: never),
// not counting failures during Grace after it starts (0 when the job is
// submitted: Nomad's DefaultCheckRestartGrace).
type CheckRestart struct {
	Limit          int           `codec:",omitempty"`
	Grace          time.Duration `codec:",omitempty"`
	IgnoreWarnings bool          `codec:",omitempty"`
}

// Service providers, check types, check modes and results.
const (
	ServiceProviderNomad  = "nomad"
	ServiceProviderConsul = "consul"

	ServiceCheckHTTP   = "http"
	ServiceCheckTCP    = "tcp"
	ServiceCheckScript = "script"

	// CheckModeHealthiness: the check decides the allocation's health
	// (deployments, migrations). CheckModeReadiness: only reported.
	CheckModeHealthiness = "healthiness"
	CheckModeReadiness   = "readiness"

	CheckSuccess = "success"
	CheckFailure = "failure"
	CheckPending = "pending"
)

// Bounds of a job's services, checked at submit.
const (
	MaxServicesPerGroup  = 64
	MaxChecksPerService  = 16
	MaxServiceTags       = 64
	MaxServiceNameLength = 63
	// MinCheckInterval is Nomad's floor of a check's interval.
	MinCheckInterval = time.Second
	// MaxCheckOutputBytes bounds a check result's output kept on the
	// registration and in the client's results.
	MaxCheckOutputBytes = 4 << 10
	// MaxRegistrationsPerRequest bounds one client upsert.
	MaxRegistrationsPerRequest = 1024

	// MaxCheckInterval bounds a check's interval and timeout.
	MaxCheckInterval = time.Hour
	// MinCheckTimeout is Nomad's floor of a check's timeout.
	MinCheckTimeout = time.Second
	// MaxServiceMeta bounds the entries of a service's meta and
	// canary_meta, and of a check's header.
	MaxServiceMeta = 64
	// MaxServiceStringBytes bounds one tag, meta value, address, path,
	// header value or argument of a service or check.
	MaxServiceStringBytes = 1 << 10
	// MaxCheckBodyBytes bounds an http check's body.
	MaxCheckBodyBytes = 4 << 10
	// MaxCheckArgs bounds a script check's args.
	MaxCheckArgs = 64
	// MaxCheckThreshold bounds success_before_passing,
	// failures_before_critical, failures_before_warning and a
	// check_restart's limit.
	MaxCheckThreshold = 1000
)

// Service address modes, update modes and check initial statuses.
const (
	AddressModeAuto   = "auto"
	AddressModeHost   = "host"
	AddressModeAlloc  = "alloc"
	AddressModeDriver = "driver"

	OnUpdateRequireHealthy = "require_healthy"
	OnUpdateIgnoreWarnings = "ignore_warnings"
	OnUpdateIgnore         = "ignore"

	ServiceCheckGRPC = "grpc"
)

// ServiceRegistration is one service of one allocation, as the servers
// keep it and `/v1/services` and `/v1/service/<name>` answer it (Nomad's
// fields; Checks is drover's: the latest result of each check, which
// Nomad keeps on the client only).
type ServiceRegistration struct {
	// ID is "_nomad-task-<allocID>-<group or task>-<service>-<port
	// label>" as Nomad builds it: stable across re-registrations.
	ID          string   `codec:",omitempty"`
	ServiceName string   `codec:",omitempty"`
	Namespace   string   `codec:",omitempty"`
	NodeID      string   `codec:",omitempty"`
	Datacenter  string   `codec:",omitempty"`
	JobID       string   `codec:",omitempty"`
	AllocID     string   `codec:",omitempty"`
	Tags        []string `codec:",omitempty"`
	Address     string   `codec:",omitempty"`
	Port        int      `codec:",omitempty"`
	// Checks: the latest result of each of the service's checks, by
	// the client that runs them.
	Checks      []*CheckStatus `codec:",omitempty"`
	CreateIndex uint64         `codec:",omitempty"`
	ModifyIndex uint64         `codec:",omitempty"`
}

// CheckStatus is the latest result of one check, as Nomad's
// `/v1/client/allocation/<id>/checks` answers it (CheckQueryResult).
type CheckStatus struct {
	// ID is stable for a check of an allocation's service.
	ID         string `codec:",omitempty"`
	Check      string `codec:",omitempty"`
	Group      string `codec:",omitempty"`
	Task       string `codec:",omitempty"`
	Service    string `codec:",omitempty"`
	Mode       string `codec:",omitempty"`
	Status     string `codec:",omitempty"`
	StatusCode int    `codec:",omitempty"`
	Output     string `codec:",omitempty"`
	// Timestamp is Unix seconds, as Nomad's.
	Timestamp int64 `codec:",omitempty"`
}

// ServiceRegistrationUpsertRequest: a client's registrations (new, or
// with new check results) for its own node's allocations.
type ServiceRegistrationUpsertRequest struct {
	Services []*ServiceRegistration
	// DeleteAllocIDs: the registrations of these allocations are deleted
	// first, in the same transaction (a client's update in one entry).
	DeleteAllocIDs []string `codec:",omitempty"`
}

// ServiceRegistrationDeleteByIDRequest deletes one registration
// (`DELETE /v1/service/<name>/<id>`, or a client deregistering).
type ServiceRegistrationDeleteByIDRequest struct {
	Namespace string
	ID        string
}

// ServiceRegistrationDeleteByNodeIDRequest deletes every registration of
// a node (the node is down or gone).
type ServiceRegistrationDeleteByNodeIDRequest struct {
	NodeID string
}

// ServiceRegistrationDeleteByAllocIDsRequest deletes every registration
// of some allocations (stopped, or collected).
type ServiceRegistrationDeleteByAllocIDsRequest struct {
	AllocIDs []string
}

// Raft entry types of service registrations.
const (
	ServiceRegistrationUpsertRequestType           MessageType = 48
	ServiceRegistrationDeleteByIDRequestType       MessageType = 49
	ServiceRegistrationDeleteByNodeIDRequestType   MessageType = 50
	ServiceRegistrationDeleteByAllocIDsRequestType MessageType = 51
)

// ServiceRegistrationNodeArgs is a client's update of its own node's
// registrations (RPC ServiceRegistration.NodeUpdate): Upsert new ones or
// ones with new check results, and delete every registration of
// DeleteAllocIDs (stopped allocations).
type ServiceRegistrationNodeArgs struct {
	NodeID         string
	SecretID       string
	Upsert         []*ServiceRegistration
	DeleteAllocIDs []string
}

// ServiceLookupArgs is a client's read of the registrations of one
// service (RPC ServiceRegistration.Lookup), for `nomadService` in
// templates. With MinIndex set the call blocks until the registrations'
// index passes it or MaxWait ends (a blocking query).
type ServiceLookupArgs struct {
	NodeID      string
	SecretID    string
	Namespace   string
	ServiceName string
	// All asks for every registration of Namespace (ServiceName is
	// ignored): the service listings of templates.
	All      bool
	MinIndex uint64
	MaxWait  time.Duration
}

// ServiceLookupReply: the registrations of the service, sorted by ID,
// and the index they were read at.
type ServiceLookupReply struct {
	Services []*ServiceRegistration
	Index    uint64
}
