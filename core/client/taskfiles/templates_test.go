package taskfiles

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

const testTimeout = 20 * time.Second

// fakeCatalog serves service lookups as the servers do: with MinIndex set
// a lookup blocks until an update passes it (or MaxWait or ctx ends); its
// index is 1 + the updates so far, never 0.
type fakeCatalog struct {
	mu      sync.Mutex
	regs    map[string]*structs.ServiceRegistration
	updates uint64
	wake    chan struct{}
}

func newFakeCatalog() *fakeCatalog {
	return &fakeCatalog{regs: map[string]*structs.ServiceRegistration{}, wake: make(chan struct{})}
}

// register upserts registrations, as another node's client would.
func (c *fakeCatalog) register(regs ...*structs.ServiceRegistration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range regs {
		c.regs[r.ID] = r
	}
	c.updates++
	close(c.wake)
	c.wake = make(chan struct{})
}

func (c *fakeCatalog) lookup(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var timeout <-chan time.Time
	if args.MinIndex > 0 && args.MaxWait > 0 {
		t := time.NewTimer(args.MaxWait)
		defer t.Stop()
		timeout = t.C
	}
	for args.MinIndex > 0 && c.updates+1 <= args.MinIndex {
		wake := c.wake
		c.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
		case <-ctx.Done():
		}
		c.mu.Lock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		select {
		case <-timeout:
			args = &structs.ServiceLookupArgs{Namespace: args.Namespace, ServiceName: args.ServiceName, All: args.All}
		default:
		}
	}
	out := &structs.ServiceLookupReply{Index: c.updates + 1}
	for _, r := range c.regs {
		if (args.All || r.ServiceName == args.ServiceName) && r.Namespace == args.Namespace {
			out.Services = append(out.Services, r)
		}
	}
	slices.SortFunc(out.Services, func(a, b *structs.ServiceRegistration) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func reg(id, alloc, name, ns, addr string, port int, tags ...string) *structs.ServiceRegistration {
	return &structs.ServiceRegistration{ID: id, AllocID: alloc, ServiceName: name, Namespace: ns, Address: addr, Port: port,
		Tags: tags, NodeID: "n-1", Datacenter: "dc1", JobID: "api"}
}

func TestTemplateNomadService(t *testing.T) {
	srv := newFakeCatalog()
	srv.register(
		reg("s1", "a1", "api", "default", "10.0.0.1", 8001, "v2", "blue"),
		reg("s2", "a2", "api", "default", "10.0.0.2", 8002, "v1"),
		reg("s3", "a3", "api", "other", "10.0.0.3", 8003),
		reg("s4", "a4", "db", "default", "10.0.0.4", 5432))
	tests := []struct {
		name, tmpl, want, wantErr string
	}{
		{name: "all instances", tmpl: `{{ range nomadService "api" }}{{ .Address }}:{{ .Port }} {{ end }}`, want: "10.0.0.1:8001 10.0.0.2:8002 "},
		{name: "fields as consul-template's", tmpl: `{{ range nomadService "api" }}{{ if eq .ID "s1" }}{{ .ID }} {{ .Name }} {{ .Node }} {{ .Datacenter }} {{ .JobID }} {{ .AllocID }} {{ .Tags }}{{ end }}{{ end }}`,
			want: "s1 api n-1 dc1 api a1 [blue v2]"},
		{name: "by tag", tmpl: `{{ range nomadService "v1.api" }}{{ .Address }}{{ end }}`, want: "10.0.0.2"},
		{name: "another namespace", tmpl: `{{ range nomadService "api@other" }}{{ .Address }}{{ end }}`, want: "10.0.0.3"},
		{name: "two services", tmpl: `{{ range nomadService "db" }}{{ .Port }}{{ end }}-{{ len (nomadService "api") }}`, want: "5432-2"},
		{name: "count and key form refused", tmpl: `{{ range nomadService 1 "k" "api" }}{{ end }}`, wantErr: "form of nomadService is not supported"},
		{name: "service listing", tmpl: `{{ range nomadServices }}{{ .Name }}{{ .Tags }} {{ end }}`, want: "api[blue v1 v2] db[] "},
		{name: "Consul's catalogue refused", tmpl: `{{ range service "api" }}{{ end }}`, wantErr: `a template reads Consul's catalogue (health.service(api|passing)), and drover has no Consul`},
		{name: "Consul's listing refused", tmpl: `{{ range services }}{{ end }}`, wantErr: "default_service_provider"},
		{name: "vault refused", tmpl: `{{ with secret "kv/x" }}{{ end }}`, wantErr: "needs data drover does not serve to templates"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allocDir, taskDir := taskDirFixture(t)
			r := NewRenderer(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: tc.tmpl, DestPath: "local/out"}},
				map[string]string{}, srv.lookup, "default", nil)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := r.Render(ctx, true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(taskDir, "local", "out"))
			if err != nil || string(b) != tc.want {
				t.Fatalf("rendered %q (%v), want %q", b, err, tc.want)
			}
		})
	}
}

// With the job's provider-less services drover's, Consul's catalogue
// functions read drover's catalogue: service "name" (tag, health filter)
// and the services listing, with consul-template's fields.
func TestTemplateConsulFromCatalogue(t *testing.T) {
	srv := newFakeCatalog()
	failing := reg("s2", "a2", "api", "default", "10.0.0.2", 8002, "v1")
	failing.Checks = []*structs.CheckStatus{{Status: structs.CheckFailure}}
	passing := reg("s1", "a1", "api", "default", "10.0.0.1", 8001, "v2", "blue")
	passing.Checks = []*structs.CheckStatus{{Status: structs.CheckSuccess}}
	warning := reg("s3", "a3", "api", "default", "10.0.0.3", 8003)
	warning.Checks = []*structs.CheckStatus{{Status: structs.CheckSuccess}, {Status: "warning"}}
	srv.register(passing, failing, warning, reg("s4", "a4", "db", "default", "10.0.0.4", 5432))
	tests := []struct {
		name, tmpl, want, wantErr string
	}{
		{name: "passing only by default", tmpl: `{{ range service "api" }}{{ .Address }}:{{ .Port }} {{ end }}`, want: "10.0.0.1:8001 "},
		{name: "any", tmpl: `{{ range service "api|any" }}{{ .ID }}={{ .Status }} {{ end }}`, want: "s1=passing s2=critical s3=warning "},
		{name: "passing or warning", tmpl: `{{ range service "api|passing,warning" }}{{ .ID }} {{ end }}`, want: "s1 s3 "},
		{name: "critical", tmpl: `{{ range service "api|critical" }}{{ .ID }}{{ end }}`, want: "s2"},
		{name: "by tag", tmpl: `{{ range service "blue.api" }}{{ .ID }} {{ .Name }} {{ .Node }} {{ .Tags }}{{ end }}`, want: "s1 api n-1 [blue v2]"},
		{name: "no checks is passing", tmpl: `{{ range service "db" }}{{ .Port }}{{ end }}`, want: "5432"},
		{name: "listing", tmpl: `{{ range services }}{{ .Name }} {{ end }}`, want: "api db "},
		{name: "a datacenter is Consul's", tmpl: `{{ range service "api@dc2" }}{{ end }}`, wantErr: "drover's catalogue serves a service by name and tag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allocDir, taskDir := taskDirFixture(t)
			r := NewRenderer(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: tc.tmpl, DestPath: "local/out"}},
				map[string]string{}, srv.lookup, "default", nil)
			r.ReadConsulFromCatalogue()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := r.Render(ctx, true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(taskDir, "local", "out"))
			if err != nil || string(b) != tc.want {
				t.Fatalf("rendered %q (%v), want %q", b, err, tc.want)
			}
		})
	}
}

// A template reading a service that has no registration yet waits for one
// (bounded by its context); without a lookup it is refused.
func TestTemplateWaitsForService(t *testing.T) {
	srv := newFakeCatalog()
	allocDir, taskDir := taskDirFixture(t)
	tmpl := []*structs.Template{{EmbeddedTmpl: `{{ range nomadService "late" }}{{ .Address }}:{{ .Port }}{{ end }}`, DestPath: "local/out"}}
	r := NewRenderer(allocDir, taskDir, tmpl, map[string]string{}, srv.lookup, "default", nil)
	done := make(chan error, 1)
	go func() {
		_, err := r.Render(context.Background(), true)
		done <- err
	}()
	// Unrelated updates do not end the wait.
	srv.register(reg("x", "ax", "other", "default", "10.9.9.9", 1))
	select {
	case err := <-done:
		t.Fatalf("render returned (%v) before the service existed", err)
	default:
	}
	srv.register(reg("l1", "al", "late", "default", "10.1.1.1", 9000))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("render did not end once the service was registered")
	}
	if b, _ := os.ReadFile(filepath.Join(taskDir, "local", "out")); string(b) != "10.1.1.1:9000" {
		t.Fatalf("rendered %q", b)
	}

	// The wait ends with its context.
	ctx, cancel := context.WithCancel(context.Background())
	r2 := NewRenderer(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: `{{ nomadService "never" }}`, DestPath: "local/n"}},
		map[string]string{}, srv.lookup, "default", nil)
	go func() { _, err := r2.Render(ctx, true); done <- err }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want canceled", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("render did not end with its context")
	}
}
