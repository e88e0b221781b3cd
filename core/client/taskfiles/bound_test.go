package taskfiles

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul-template/template"

	"github.com/drover-org/drover/core/structs"
)

// The rewritten template renders the same text as the original, across
// the language: delimiters, trim markers, branches, ranges with break and
// continue, variables, defines and blocks, pipelines and helpers.
func TestBoundTemplateRendersTheSame(t *testing.T) {
	for _, tc := range []struct{ src, left, right string }{
		{src: "plain text only\nline 2\n"},
		{src: `a {{ "x" }} b {{- " y " -}} c`},
		{src: "{{/* a comment */}}x{{ 1 }}{{ 2.5 }}{{ true }}{{ printf \"%v\" nil }}"},
		{src: `{{ if eq 1 2 }}one{{ else if eq 2 2 }}two{{ else }}three{{ end }}`},
		{src: `{{ with $x := "v" }}{{ $x }}{{ else }}none{{ end }}{{ with "" }}no{{ else with "w" }}{{ . }}{{ end }}`},
		{src: `{{ range $i, $e := sprig_list "a" "b" "c" }}{{ if eq $i 1 }}{{ continue }}{{ end }}{{ $i }}={{ $e }};{{ if eq $e "c" }}{{ break }}{{ end }}{{ end }}`},
		{src: `{{ range $i := loop 3 }}{{ $i }},{{ end }}{{ range loop 2 5 }}{{ . }}{{ end }}{{ range sprig_until 3 }}{{ . }}{{ end }}`},
		{src: `{{ range 3 }}{{ . }}{{ end }}{{ range sprig_list }}x{{ else }}empty{{ end }}`},
		{src: `{{ $x := 1 }}{{ $x = 2 }}{{ $x }}{{ $s := "a" }}{{ range loop 3 }}{{ $s = printf "%s%s" $s "b" }}{{ end }}{{ $s }}`},
		{src: `{{ define "item" }}<{{ . }}>{{ end }}{{ template "item" "a" }}{{ block "b" "z" }}[{{ . }}]{{ end }}`},
		{src: `{{ "a,b" | split "," | join ";" }} {{ "abc" | toUpper | printf "%5s|%-4s|" "x" }} {{ parseJSON "{\"k\":[1,2]}" | toJSON }}`},
		{src: `{{ indent 2 "a\nb" }}|{{ sprig_indent 2 "a" }}|{{ sprig_nindent 1 "b" }}|{{ sprig_repeat 3 "ab" }}|{{ replaceAll "a" "xy" "banana" }}|{{ sprig_replace "n" "N" "banana" }}|{{ sprig_seq 3 }}`},
		{src: `{{ env "K" }}-{{ envOrDefault "NOPE" "d" }}-{{ .missing }}-{{ . }}`},
		{src: "[[ \"custom\" ]] {{ literal }} [[- if true ]] yes [[ end ]]", left: "[[", right: "]]"},
		{src: "{{ range loop 2 }}\n  line {{ . }}\n{{ end }}"},
		{src: `{{ scratch.Set "k" "v" }}{{ scratch.Get "k" }}{{ $m := sprig_dict "a" 1 }}{{ $m.a }}{{ index $m "a" }}`},
	} {
		left, right := tc.left, tc.right
		if left == "" {
			left, right = "{{", "}}"
		}
		env := map[string]any{"env": func(k string) string { return map[string]string{"K": "kv"}[k] }}
		orig, err := template.NewTemplate(&template.NewTemplateInput{Contents: tc.src, LeftDelim: left, RightDelim: right, ExtFuncMap: env})
		if err != nil {
			t.Fatal(err)
		}
		want, err := orig.Execute(&template.ExecuteInput{Brain: template.NewBrain()})
		if err != nil {
			t.Fatalf("%s: original: %v", tc.src, err)
		}
		rewritten, err := boundTemplate(tc.src, left, right)
		if err != nil {
			t.Fatalf("%s: rewrite: %v", tc.src, err)
		}
		var b renderBudget
		funcs := boundedFuncs(&b)
		funcs["env"] = env["env"]
		bt, err := template.NewTemplate(&template.NewTemplateInput{Contents: rewritten, LeftDelim: "{{", RightDelim: "}}", ExtFuncMap: funcs})
		if err != nil {
			t.Fatal(err)
		}
		got, err := bt.Execute(&template.ExecuteInput{Brain: template.NewBrain()})
		if err != nil {
			t.Fatalf("%s: rewritten (%s): %v", tc.src, rewritten, err)
		}
		if string(got.Output) != string(want.Output) {
			t.Errorf("%s:\n got %q\nwant %q\n(rewritten %s)", tc.src, got.Output, want.Output, rewritten)
		}
	}
}

// A template whose output passes the bound fails the task's setup naming
// the bound; the render stops early, so the client's memory does not grow
// with what the template asks for.
func TestTemplateOutputBounded(t *testing.T) {
	for _, tc := range []struct{ name, tmpl, want string }{
		{"loop output", `{{ range loop 5000000 }}xxxxxxxxxxxxxxxxxxxx{{ end }}`, "over 4194304 bytes"},
		{"native range output", `{{ range 5000000 }}{{ . }}xxxxxxxxxxxxxxxx{{ end }}`, "over 4194304 bytes"},
		{"nested loops", `{{ range loop 3000 }}{{ range loop 3000 }}{{ end }}{{ end }}`, "more than 250000 loop iterations"},
		{"empty loop", `{{ range loop 500000000 }}{{ end }}`, "more than 250000 loop iterations"},
		{"until allocates", `{{ range sprig_until 200000000 }}{{ end }}`, "over the bound of 250000"},
		{"repeat", `{{ sprig_repeat 100000000 "xx" }}`, "repeat: 100000000 times 2 bytes"},
		{"printf width", `{{ printf "%0999999999d" 1 }}`, "printf width or precision over 65536"},
		{"indent", `{{ indent 999999999 "a" }}`, "over the bound of 4194304 bytes"},
		{"replace", `{{ $s := sprig_repeat 4000000 "a" }}{{ replaceAll "a" "bbbbbbbb" $s }}`, "over the bound of 4194304 bytes"},
		{"doubling variable", `{{ $s := "0123456789abcdef" }}{{ range loop 40 }}{{ $s = printf "%s%s" $s $s }}{{ end }}`, "over the bound of 4194304 bytes"},
		{"recursion", `{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" }}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allocDir, taskDir := taskDirFixture(t)
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			// The heap's peak during the render, sampled.
			peak := make(chan uint64)
			done := make(chan struct{})
			go func() {
				var top uint64
				tick := time.NewTicker(2 * time.Millisecond)
				defer tick.Stop()
				for {
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					top = max(top, m.HeapAlloc)
					select {
					case <-done:
						peak <- top
						return
					case <-tick.C:
					}
				}
			}()
			_, err := renderTemplates(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: tc.tmpl, DestPath: "local/out"}}, nil)
			close(done)
			top := <-peak
			if err == nil || !strings.Contains(err.Error(), "template 1 (local/out)") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want the bound %q", err, tc.want)
			}
			if tc.want != "" && !errors.Is(err, errTemplateBound) {
				t.Fatalf("err = %v, not a bound error", err)
			}
			if top > before.HeapAlloc && top-before.HeapAlloc > 64<<20 {
				t.Errorf("the heap grew by %d MB during the render", (top-before.HeapAlloc)>>20)
			}
			if _, err := os.Lstat(filepath.Join(taskDir, "local", "out")); !os.IsNotExist(err) {
				t.Errorf("the destination was written (stat: %v)", err)
			}
		})
	}
	// Just under the bound renders.
	allocDir, taskDir := taskDirFixture(t)
	if _, err := renderTemplates(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: `{{ range loop 4000 }}` + strings.Repeat("y", 1000) + `{{ end }}`, DestPath: "local/out"}}, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(taskDir, "local", "out")); err != nil || fi.Size() != 4_000_000 {
		t.Fatalf("rendered %v, %v; want 4000000 bytes", fi, err)
	}
}
