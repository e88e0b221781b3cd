package basetest_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/base/basetest"
	"github.com/drover-org/drover/sdk/proto/basepb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type limit struct {
	Max int `hcl:"max"`
}

type good struct {
	PageSize int               `hcl:"page_size,optional"`
	Timeout  time.Duration     `hcl:"timeout,optional"`
	Tags     []string          `hcl:"tags,optional"`
	Weights  map[string]int    `hcl:"weights,optional"`
	Ratio    float32           `hcl:"ratio,optional"`
	Debug    bool              `hcl:"debug,optional"`
	Limits   []limit           `hcl:"limit,block"`
	Named    map[string]limit  `hcl:"named,block"`
	Extra    map[string]string `hcl:"extra,optional"`
}

type needsMode struct {
	Mode string `hcl:"mode"`
	N    int    `hcl:"n,optional"`
}

// configurable serves a Settable as a plugin implementation would.
type configurable struct{ s base.Settable }

func (c configurable) PluginConfig() base.Settable { return c.s }

// broken wraps a Settable and breaks one rule.
type broken struct {
	base.Settable
	spec   func(*basepb.Spec) *basepb.Spec
	set    func(js []byte) []*basepb.FieldError
	asked  atomic.Int32
	accept bool // accept everything
}

func (b *broken) Spec() *basepb.Spec {
	s := b.Settable.Spec()
	b.asked.Add(1)
	if b.spec != nil {
		return b.spec(s)
	}
	return s
}

func (b *broken) SetJSON(js []byte, name string) ([]*basepb.FieldError, error) {
	if b.accept {
		return nil, nil
	}
	if b.set != nil {
		if errs := b.set(js); errs != nil {
			return errs, nil
		}
	}
	return b.Settable.SetJSON(js, name)
}

func client(t *testing.T, impl any) *base.Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	if err := base.Register(srv, impl); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///basetest",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-done
	})
	return base.NewClient(conn)
}

func TestCheck(t *testing.T) {
	goodCfg := func() base.Settable {
		return base.MustConfig(good{PageSize: 10, Timeout: time.Minute, Tags: []string{"x"}, Weights: map[string]int{"a": 1}, Ratio: 0.25},
			func(g good) []*basepb.FieldError {
				if g.PageSize < 1 {
					return []*basepb.FieldError{base.FieldErrorf("page_size", "must be at least 1")}
				}
				return nil
			})
	}
	modeCfg := func() base.Settable { return base.MustConfig(needsMode{}, nil) }
	cases := []struct {
		name string
		impl func() any
		want []string // a substring of each failure, in order; none: passes
	}{
		{"good", func() any { return configurable{goodCfg()} }, nil},
		{"required", func() any { return configurable{modeCfg()} }, nil},
		{"no config", func() any { return struct{}{} }, nil},
		{"accepts anything", func() any { return configurable{&broken{Settable: goodCfg(), accept: true}} },
			[]string{"must be refused with a field error whose path is " + basetest.UnknownField}},
		{"accepts anything, required", func() any { return configurable{&broken{Settable: modeCfg(), accept: true}} },
			[]string{"naming a required field (mode)", "unknown field"}},
		{"refuses a default", func() any {
			return configurable{&broken{Settable: goodCfg(), set: func(js []byte) []*basepb.FieldError {
				if strings.Contains(string(js), `"timeout":"1m0s"`) {
					return []*basepb.FieldError{base.FieldErrorf("timeout", "no")}
				}
				return nil
			}}}
		}, []string{"SetConfig refused the defaults", "refused attribute page_size", "refused attribute timeout",
			"refused attribute tags", "refused attribute weights", "refused attribute ratio", "refused attribute debug"}},
		{"bad schema", func() any {
			return configurable{&broken{Settable: goodCfg(), spec: func(s *basepb.Spec) *basepb.Spec {
				s.Attributes[0].Type = "numbr"
				return s
			}}}
		}, []string{"cannot decode against"}},
		{"schema changes", func() any {
			b := &broken{Settable: goodCfg()}
			b.spec = func(s *basepb.Spec) *basepb.Spec {
				if b.asked.Load() > 1 {
					s.Attributes = s.Attributes[1:]
				}
				return s
			}
			return configurable{b}
		}, []string{"must not change"}},
		{"string typed number", func() any {
			return configurable{&broken{Settable: goodCfg(), spec: func(s *basepb.Spec) *basepb.Spec {
				// A schema whose page_size is any cannot refuse a
				// wrong type, but its default still decodes.
				s.Attributes[0].Type = "any"
				return s
			}}}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := basetest.Check(t.Context(), client(t, tc.impl()))
			if len(got) != len(tc.want) {
				t.Fatalf("failures %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("failure %d: %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

// TestCheckConfigReports checks that CheckConfig reports through t.
func TestCheckConfigReports(t *testing.T) {
	rec := &recorder{}
	basetest.CheckConfig(rec, client(t, configurable{&broken{Settable: base.MustConfig(needsMode{}, nil), accept: true}}))
	if len(rec.errs) != 2 || !strings.HasPrefix(rec.errs[0], "config conformance: ") {
		t.Fatalf("reported %q", rec.errs)
	}
}

type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
