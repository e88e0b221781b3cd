package taskfiles

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

// fakeVars serves task variable reads as the servers do: the task's paths
// only, blocking with MinIndex until a write passes it.
type fakeVars struct {
	mu      sync.Mutex
	vars    map[string]structs.VariableItems
	updates uint64
	wake    chan struct{}
}

func newFakeVars() *fakeVars {
	return &fakeVars{vars: map[string]structs.VariableItems{}, wake: make(chan struct{})}
}

func (f *fakeVars) put(path string, items structs.VariableItems) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vars[path] = items
	f.updates++
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *fakeVars) lookup(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for args.MinIndex > 0 && f.updates+1 <= args.MinIndex {
		wake := f.wake
		f.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		f.mu.Lock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	out := &structs.VariableTaskReadReply{Index: f.updates + 1}
	if args.List {
		for p := range f.vars {
			if strings.HasPrefix(p, args.Prefix) {
				out.List = append(out.List, &structs.VariableMetadata{Namespace: "default", Path: p})
			}
		}
		return out, nil
	}
	if items, ok := f.vars[args.Path]; ok {
		out.Var = &structs.Variable{Namespace: "default", Path: args.Path, Items: items}
	}
	return out, nil
}

func TestTemplateNomadVar(t *testing.T) {
	vars := newFakeVars()
	vars.put("nomad/jobs/web", structs.VariableItems{"user": "u", "pass": "p"})
	tests := []struct {
		name, tmpl, want, wantErr string
		noLookup                  bool
	}{
		{name: "item", tmpl: `{{ with nomadVar "nomad/jobs/web" }}{{ .user }}:{{ .pass }}{{ end }}`, want: "u:p"},
		{name: "range", tmpl: `{{ with nomadVar "nomad/jobs/web" }}{{ range $k, $v := . }}{{ $k }}={{ $v }};{{ end }}{{ end }}`, want: "pass=p;user=u;"},
		{name: "exists", tmpl: `{{ nomadVarExists "nomad/jobs/web" }} {{ nomadVarExists "nomad/jobs/none" }}`, want: "true false"},
		{name: "list", tmpl: `{{ range nomadVarList "nomad/jobs" }}{{ .Path }}{{ end }}`, want: "nomad/jobs/web"},
		{name: "another namespace", tmpl: `{{ nomadVar "nomad/jobs/web@prod" }}`, wantErr: "its own namespace"},
		{name: "no lookup", tmpl: `{{ nomadVar "nomad/jobs/web" }}`, noLookup: true, wantErr: "serves no variables"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allocDir, taskDir := taskDirFixture(t)
			r := NewRenderer(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: tc.tmpl, DestPath: "local/out"}},
				map[string]string{}, nil, "default", nil)
			if !tc.noLookup {
				r.SetVariableLookup(vars.lookup)
			}
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
			if b, err := os.ReadFile(filepath.Join(taskDir, "local", "out")); err != nil || string(b) != tc.want {
				t.Fatalf("rendered %q (%v), want %q", b, err, tc.want)
			}
		})
	}
}

// nomadVar waits for a variable that does not exist yet, and a template
// renders again when its variable changes.
func TestTemplateNomadVarWaitsAndFollows(t *testing.T) {
	vars := newFakeVars()
	allocDir, taskDir := taskDirFixture(t)
	r := NewRenderer(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: `{{ with nomadVar "nomad/jobs/web/g/t" }}{{ .v }}{{ end }}`, DestPath: "local/out"}},
		map[string]string{}, nil, "default", nil)
	r.SetVariableLookup(vars.lookup)
	done := make(chan error, 1)
	go func() { _, err := r.Render(context.Background(), true); done <- err }()
	vars.put("nomad/jobs/other", structs.VariableItems{"v": "x"})
	select {
	case err := <-done:
		t.Fatalf("render returned (%v) before the variable existed", err)
	default:
	}
	vars.put("nomad/jobs/web/g/t", structs.VariableItems{"v": "1"})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("render did not end once the variable was written")
	}
	out := filepath.Join(taskDir, "local", "out")
	if b, _ := os.ReadFile(out); string(b) != "1" {
		t.Fatalf("rendered %q", b)
	}
	if !r.Watched() {
		t.Fatal("a template reading a variable is not watched")
	}

	ctx, cancel := context.WithCancel(context.Background())
	changed := make(chan []int, 4)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.Watch(ctx, func(int) time.Duration { return 10 * time.Millisecond }, func(c []int) { changed <- c })
	}()
	defer func() { cancel(); <-watched }()
	vars.put("nomad/jobs/web/g/t", structs.VariableItems{"v": "2"})
	testwait.For(t, testTimeout, "the template rendered again", func() bool {
		b, _ := os.ReadFile(out)
		return string(b) == "2"
	})
	select {
	case c := <-changed:
		if len(c) != 1 || c[0] != 0 {
			t.Errorf("changed %v", c)
		}
	case <-time.After(testTimeout):
		t.Fatal("no change reported")
	}
}
