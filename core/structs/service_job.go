package structs

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultServiceName is the name Nomad gives a service block that names
// none: "<job>-<group>" for a group's, "<job>-<group>-<task>" for a
// task's.
func DefaultServiceName(job, group, task string) string {
	if task == "" {
		return job + "-" + group
	}
	return job + "-" + group + "-" + task
}

// DefaultCheckName is the name Nomad gives a check that names none.
func DefaultCheckName(service string) string {
	return fmt.Sprintf("service: %q check", service)
}

// canonicalizeServices fills the defaults of a group's services and of
// its tasks' services, as Nomad's API does.
func (tg *TaskGroup) canonicalizeServices(jobName string) {
	for _, s := range tg.Services {
		if s != nil {
			s.Canonicalize(jobName, tg.Name, "")
		}
	}
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		for _, s := range t.Services {
			if s != nil {
				s.Canonicalize(jobName, tg.Name, t.Name)
			}
		}
	}
}

// Canonicalize fills a service's defaults: its name from the job, group
// and task (task is "" for a group's service), address_mode "auto", on_update
// "require_healthy", and each check's name, address mode, on_update (the
// service's), task, check_restart (the service's under the check's own),
// and an http check's protocol and method. A task's
// service runs in the task. Interpolations (${NOMAD_…}) are kept raw: the
// client resolves them.
func (s *Service) Canonicalize(job, group, task string) {
	if s.Name == "" {
		s.Name = DefaultServiceName(job, group, task)
	}
	if task != "" {
		s.TaskName = task
	}
	if s.AddressMode == "" {
		s.AddressMode = AddressModeAuto
	}
	if s.OnUpdate == "" {
		s.OnUpdate = OnUpdateRequireHealthy
	}
	for _, c := range s.Checks {
		if c == nil {
			continue
		}
		if base := s.CheckRestart; base != nil {
			c.CheckRestart = base.under(c.CheckRestart)
		}
		if r := c.CheckRestart; r != nil && r.Grace == 0 {
			// Nomad's grace when none is given (its 0 is "unset" here).
			r.Grace = DefaultCheckRestartGrace
		}
		if c.Name == "" {
			c.Name = DefaultCheckName(s.Name)
		}
		if c.AddressMode == "" {
			c.AddressMode = AddressModeHost
		}
		if c.OnUpdate == "" {
			c.OnUpdate = s.OnUpdate
		}
		if c.TaskName == "" {
			c.TaskName = s.TaskName
		}
		if c.Type == ServiceCheckHTTP {
			if c.Protocol == "" {
				c.Protocol = "http"
			}
			if c.Method == "" {
				c.Method = "GET"
			}
		}
	}
	s.CheckRestart = nil
}

// under lays a check's own check_restart (nil: none) over the service's
// r, as Nomad merges them: what the check sets wins.
func (r *CheckRestart) under(own *CheckRestart) *CheckRestart {
	out := *r
	if own == nil {
		return &out
	}
	if own.Limit != 0 {
		out.Limit = own.Limit
	}
	if own.Grace != 0 {
		out.Grace = own.Grace
	}
	if own.IgnoreWarnings {
		out.IgnoreWarnings = true
	}
	return &out
}

// validateServices checks a group's services and its tasks' services.
func (tg *TaskGroup) validateServices(l *errList, where string) {
	ports := map[string]bool{}
	for _, n := range tg.Networks {
		if n == nil {
			continue
		}
		for _, p := range n.ReservedPorts {
			ports[p.Label] = true
		}
		for _, p := range n.DynamicPorts {
			ports[p.Label] = true
		}
	}
	tasks := map[string]bool{}
	total := len(tg.Services)
	for _, t := range tg.Tasks {
		if t != nil {
			tasks[t.Name] = true
			total += len(t.Services)
		}
	}
	if total > MaxServicesPerGroup {
		l.add("%s: %d service blocks (the group's and its tasks'), more than %d", where, total, MaxServicesPerGroup)
		return
	}
	names := map[string]string{}
	check := func(s *Service, w, task string, i int) {
		if s == nil {
			l.add("%s: service %d: null is not allowed", w, i+1)
			return
		}
		sw := fmt.Sprintf("%s: service %q", w, s.Name)
		if prev, dup := names[s.Name]; dup && s.Name != "" {
			l.add("%s: name is also the service's of %s; service names must be unique in a group", sw, prev)
		}
		names[s.Name] = w
		s.validate(l, sw, task, ports, tasks)
	}
	for i, s := range tg.Services {
		check(s, where, "", i)
	}
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		for i, s := range t.Services {
			check(s, fmt.Sprintf("%s: task %q", where, t.Name), t.Name, i)
		}
	}
}

// validServiceName is Nomad's rule for a service name (RFC 1123 label,
// at most 63 characters). A name holding an interpolation is checked by
// the client once resolved; it is only bounded here.
func validServiceName(name string) bool {
	if len(name) == 0 || len(name) > MaxServiceNameLength {
		return false
	}
	if name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, r := range name {
		if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// validatePort checks a service's or check's port: a label of the
// group's network block or a port number.
func validatePort(l *errList, w, label string, ports map[string]bool) {
	if label == "" || ports[label] {
		return
	}
	if n, err := strconv.Atoi(label); err == nil {
		if n < MinPort || n > MaxPort {
			l.add("%s: port %d is outside %d-%d", w, n, MinPort, MaxPort)
		}
		return
	}
	l.add("%s: port %q is not a port label of the group's network block", w, label)
}

func validateStrings(l *errList, w, what string, list []string, max int) {
	if len(list) > max {
		l.add("%s: %d %s, more than %d", w, len(list), what, max)
		return
	}
	for _, s := range list {
		if len(s) > MaxServiceStringBytes {
			l.add("%s: %s: an entry of %d bytes, more than %d", w, what, len(s), MaxServiceStringBytes)
			return
		}
	}
}

func validateStringMap(l *errList, w, what string, m map[string]string) {
	if len(m) > MaxServiceMeta {
		l.add("%s: %s has %d entries, more than %d", w, what, len(m), MaxServiceMeta)
		return
	}
	for k, v := range m {
		if len(k) > MaxServiceStringBytes || len(v) > MaxServiceStringBytes {
			l.add("%s: %s: an entry longer than %d bytes", w, what, MaxServiceStringBytes)
			return
		}
	}
}

func validOnUpdate(s string) bool {
	switch s {
	case OnUpdateRequireHealthy, OnUpdateIgnoreWarnings, OnUpdateIgnore:
		return true
	}
	return false
}

// validate checks one service of a group (task "") or of a task.
func (s *Service) validate(l *errList, w, task string, ports, tasks map[string]bool) {
	switch s.Provider {
	case ServiceProviderNomad:
	case "":
		// The cluster's default provider, which the server resolves at
		// registration (Nomad's is "consul"; drover's servers may be
		// configured to serve such services themselves).
	case ServiceProviderConsul:
		l.add("%s: provider \"consul\" needs Consul, and drover has no Consul integration: set provider = \"nomad\" (Nomad's native service discovery)", w)
	default:
		l.add("%s: provider %q is unknown; drover serves provider \"nomad\"", w, s.Provider)
	}
	s.validateIntegrations(l, w)
	switch {
	case s.Name == "":
		l.add("%s: name is required", w)
	case strings.Contains(s.Name, "${"):
		if len(s.Name) > MaxServiceStringBytes {
			l.add("%s: name is %d bytes, more than %d", w, len(s.Name), MaxServiceStringBytes)
		}
	case !validServiceName(s.Name):
		l.add("%s: name must be at most %d letters, digits and dashes, not starting or ending with a dash (RFC 1123)", w, MaxServiceNameLength)
	}
	validatePort(l, w, s.PortLabel, ports)
	switch s.AddressMode {
	case AddressModeAuto, AddressModeHost:
	case AddressModeAlloc, AddressModeDriver:
		l.add("%s: address_mode %q is not supported (drover serves host networking only): use \"auto\" or \"host\"", w, s.AddressMode)
	default:
		l.add("%s: address_mode is %q, must be \"auto\" or \"host\"", w, s.AddressMode)
	}
	if s.Address != "" {
		if s.AddressMode != AddressModeAuto {
			l.add("%s: address may only be set with address_mode \"auto\" (got %q)", w, s.AddressMode)
		}
		if len(s.Address) > MaxServiceStringBytes {
			l.add("%s: address is %d bytes, more than %d", w, len(s.Address), MaxServiceStringBytes)
		}
	}
	validateStrings(l, w, "tags", s.Tags, MaxServiceTags)
	validateStrings(l, w, "canary_tags", s.CanaryTags, MaxServiceTags)
	validateStringMap(l, w, "meta", s.Meta)
	validateStringMap(l, w, "canary_meta", s.CanaryMeta)
	if !validOnUpdate(s.OnUpdate) {
		l.add("%s: on_update is %q, must be %q, %q or %q", w, s.OnUpdate, OnUpdateRequireHealthy, OnUpdateIgnoreWarnings, OnUpdateIgnore)
	}
	switch {
	case task != "" && s.TaskName != task:
		l.add("%s: task is %q; a task's service runs in its own task", w, s.TaskName)
	case task == "" && s.TaskName != "" && !tasks[s.TaskName]:
		l.add("%s: task %q is not a task of the group", w, s.TaskName)
	}
	if len(s.Checks) > MaxChecksPerService {
		l.add("%s: %d check blocks, more than %d", w, len(s.Checks), MaxChecksPerService)
		return
	}
	checks := map[string]bool{}
	for i, c := range s.Checks {
		if c == nil {
			l.add("%s: check %d: null is not allowed", w, i+1)
			continue
		}
		cw := fmt.Sprintf("%s: check %q", w, c.Name)
		if checks[c.Name] {
			l.add("%s: defined more than once; check names must be unique in a service", cw)
		}
		checks[c.Name] = true
		c.validate(l, cw, s, task, ports, tasks)
	}
}

func validateCheckDuration(l *errList, w, what string, d, min time.Duration) {
	switch {
	case d < min:
		l.add("%s: %s must be at least %s (got %s)", w, what, min, d)
	case d > MaxCheckInterval:
		l.add("%s: %s must be at most %s (got %s)", w, what, MaxCheckInterval, d)
	}
}

func validateThreshold(l *errList, w, what string, n int) {
	if n < 0 || n > MaxCheckThreshold {
		l.add("%s: %s must be between 0 and %d (got %d)", w, what, MaxCheckThreshold, n)
	}
}

// validate checks one check of service s (of task, "" for a group's).
func (c *ServiceCheck) validate(l *errList, w string, s *Service, task string, ports, tasks map[string]bool) {
	if len(c.Name) > MaxServiceStringBytes {
		l.add("%s: name is %d bytes, more than %d", w, len(c.Name), MaxServiceStringBytes)
	}
	if c.Advertise != "" {
		l.add("%s: advertise is not supported: drover's checks run against the service's address and port", w)
	}
	switch c.Type {
	case ServiceCheckHTTP:
		if c.Path == "" {
			l.add("%s: an http check needs a path", w)
		}
		switch c.Protocol {
		case "http", "https":
		default:
			l.add("%s: protocol is %q, must be \"http\" or \"https\"", w, c.Protocol)
		}
		if c.Method == "" || len(c.Method) > 32 || strings.IndexFunc(c.Method, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
			l.add("%s: method %q is not an HTTP method (upper-case letters)", w, c.Method)
		}
	case ServiceCheckTCP:
	case ServiceCheckScript:
		if c.Command == "" {
			l.add("%s: a script check needs a command", w)
		}
		if c.TaskName == "" {
			l.add("%s: a script check of a group service needs a task to run in (task = \"…\" in the check or the service)", w)
		}
	case ServiceCheckGRPC:
		l.add("%s: type \"grpc\" is not supported: drover's client runs http, tcp and script checks", w)
	case "":
		l.add("%s: type is required (\"http\", \"tcp\" or \"script\")", w)
	default:
		l.add("%s: type is %q, must be \"http\", \"tcp\" or \"script\"", w, c.Type)
	}
	if c.GRPCService != "" && c.Type != ServiceCheckGRPC {
		l.add("%s: grpc_service is for grpc checks, which drover does not run", w)
	}
	if c.GRPCUseTLS && c.Type != ServiceCheckGRPC {
		l.add("%s: grpc_use_tls is for grpc checks, which drover does not run", w)
	}
	if c.Expose {
		l.add("%s: expose: not supported: it needs Consul Connect, and drover has no Consul integration; remove it", w)
	}
	if c.Notes != "" {
		l.add("%s: notes: not supported: a check's notes are Consul's; remove it", w)
	}
	validateCheckDuration(l, w, "interval", c.Interval, MinCheckInterval)
	validateCheckDuration(l, w, "timeout", c.Timeout, MinCheckTimeout)
	validatePort(l, w, c.PortLabel, ports)
	if (c.Type == ServiceCheckHTTP || c.Type == ServiceCheckTCP) && c.PortLabel == "" && s.PortLabel == "" {
		l.add("%s: an %s check needs a port (its own or the service's)", w, c.Type)
	}
	switch c.AddressMode {
	case AddressModeHost:
	case AddressModeAlloc, AddressModeDriver:
		l.add("%s: address_mode %q is not supported (drover serves host networking only): use \"host\"", w, c.AddressMode)
	default:
		l.add("%s: address_mode is %q, must be \"host\"", w, c.AddressMode)
	}
	switch {
	case task != "" && c.TaskName != task:
		l.add("%s: task may only be set in the checks of a group's service", w)
	case task == "" && c.TaskName != "" && !tasks[c.TaskName]:
		l.add("%s: task %q is not a task of the group", w, c.TaskName)
	}
	switch c.InitialStatus {
	case "", "passing", "warning", "critical":
	default:
		l.add("%s: initial_status is %q, must be \"passing\", \"warning\" or \"critical\"", w, c.InitialStatus)
	}
	if !validOnUpdate(c.OnUpdate) {
		l.add("%s: on_update is %q, must be %q, %q or %q", w, c.OnUpdate, OnUpdateRequireHealthy, OnUpdateIgnoreWarnings, OnUpdateIgnore)
	}
	validateThreshold(l, w, "success_before_passing", c.SuccessBeforePassing)
	validateThreshold(l, w, "failures_before_critical", c.FailuresBeforeCritical)
	validateThreshold(l, w, "failures_before_warning", c.FailuresBeforeWarning)
	if len(c.Path) > MaxServiceStringBytes || len(c.Command) > MaxServiceStringBytes || len(c.TLSServerName) > MaxServiceStringBytes {
		l.add("%s: path, command and tls_server_name may be at most %d bytes", w, MaxServiceStringBytes)
	}
	if len(c.Body) > MaxCheckBodyBytes {
		l.add("%s: body is %d bytes, more than %d", w, len(c.Body), MaxCheckBodyBytes)
	}
	validateStrings(l, w, "args", c.Args, MaxCheckArgs)
	if len(c.Header) > MaxServiceMeta {
		l.add("%s: header has %d entries, more than %d", w, len(c.Header), MaxServiceMeta)
	}
	for k, vs := range c.Header {
		if len(k) > MaxServiceStringBytes || len(vs) > MaxServiceMeta {
			l.add("%s: header: a name longer than %d bytes or more than %d values", w, MaxServiceStringBytes, MaxServiceMeta)
			break
		}
		n := len(l.errs)
		if validateStrings(l, w, "header values", vs, MaxServiceMeta); len(l.errs) > n {
			break
		}
	}
	if r := c.CheckRestart; r != nil {
		validateThreshold(l, w+": check_restart", "limit", r.Limit)
		if r.Grace < 0 || r.Grace > MaxCheckInterval {
			l.add("%s: check_restart: grace must be between 0 and %s (got %s)", w, MaxCheckInterval, r.Grace)
		}
	}
}
