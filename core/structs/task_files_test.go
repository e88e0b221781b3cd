package structs

import (
	"strings"
	"testing"
)

// TestValidateTaskFiles: artifact and template blocks the client could not
// honour, or that would write outside the allocation, are refused at
// submit naming the block and the rule.
func TestValidateTaskFiles(t *testing.T) {
	tmpl := func(dest string) *Template { return &Template{EmbeddedTmpl: "x", DestPath: dest} }
	for _, tc := range []struct {
		name      string
		artifacts []*TaskArtifact
		templates []*Template
		want      string // "" when valid
	}{
		{"valid", []*TaskArtifact{{GetterSource: "https://x/y.tgz"}}, []*Template{tmpl("local/a"), tmpl("../alloc/shared.conf")}, ""},
		{"artifact without source", []*TaskArtifact{{RelativeDest: "local/"}}, nil, "artifact 1: source is required"},
		{"artifact bad mode", []*TaskArtifact{{GetterSource: "x", GetterMode: "tree"}}, nil, `artifact 1: mode is "tree"`},
		{"artifact escaping", []*TaskArtifact{{GetterSource: "x", RelativeDest: "../../etc"}}, nil, `destination "../../etc" escapes the allocation directory`},
		{"artifact absolute", []*TaskArtifact{{GetterSource: "x", RelativeDest: "/etc"}}, nil, "escapes the allocation directory"},
		{"too many artifacts", make([]*TaskArtifact, MaxArtifactsPerTask+1), nil, "Artifacts: 33 entries; exceeds limit MaxArtifactsPerTask (32)"},
		{"template without data or source", nil, []*Template{{DestPath: "local/a"}}, "template 1: data or source is required"},
		{"template with both", nil, []*Template{{DestPath: "local/a", EmbeddedTmpl: "x", SourcePath: "local/t.tpl"}}, "set data or source, not both"},
		{"template escaping", nil, []*Template{tmpl("../../../etc/passwd")}, "escapes the allocation directory"},
		{"template same destination", nil, []*Template{tmpl("local/a"), tmpl("local/./a")}, `template 2: destination "local/./a" is also template 1's`},
		{"template signal without signal", nil, []*Template{{EmbeddedTmpl: "x", DestPath: "local/a", ChangeMode: "signal"}}, "change_signal is required"},
		{"template script", nil, []*Template{{EmbeddedTmpl: "x", DestPath: "local/a", ChangeMode: "script"}}, `change_mode "script" is not supported`},
		{"template bad perms", nil, []*Template{{EmbeddedTmpl: "x", DestPath: "local/a", Perms: "rw-r--r--"}}, `perms "rw-r--r--": must be an octal file mode`},
		{"template one delimiter", nil, []*Template{{EmbeddedTmpl: "x", DestPath: "local/a", LeftDelim: "[["}}, ""},
		{"template too large", nil, []*Template{{EmbeddedTmpl: strings.Repeat("x", MaxTemplateBytes+1), DestPath: "local/a"}}, "EmbeddedTmpl: 262145 bytes; exceeds limit MaxTemplateBytes (262144)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Type: "sysbatch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
				Name: "g", Tasks: []*Task{{Name: "t", Driver: "raw_exec", Artifacts: tc.artifacts, Templates: tc.templates}},
			}}}
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
