package docker

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The plugin is built on the public SDK alone: no drover import outside
// sdk/ (the core is never imported), in its package, its cmd and its test
// programs.
func TestImportsOnlySDK(t *testing.T) {
	const module = "github.com/drover-org/drover/"
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("glob: %v %v", files, err)
	}
	cmds, _ := filepath.Glob("cmd/*/*.go")
	progs, _ := filepath.Glob("testdata/*/*.go")
	for _, f := range append(append(files, cmds...), progs...) {
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ours := strings.CutPrefix(p, module)
			if ours && !strings.HasPrefix(rest, "sdk/") && rest != "plugins/driver-docker" {
				t.Errorf("%s imports %s; a plugin imports only %ssdk/...", f, p, module)
			}
		}
	}
}
