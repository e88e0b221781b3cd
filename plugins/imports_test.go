// Package plugins_test holds the checks every built-in plugin shares.
package plugins_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notPlugins are directories of plugins/ that are not plugins: builtin
// lists the plugins for the drover binary and imports the core to do so.
var notPlugins = map[string]bool{"builtin": true}

// pluginDeps are the other plugins a plugin is built on, by their
// exported API: exec runs its tasks through raw_exec's supervisor,
// recovery and cgroups rather than repeat them.
var pluginDeps = map[string][]string{"driver-exec": {"plugins/driver-rawexec"}}

// testHelpers are the repository's test utilities a plugin's tests may use:
// they are never part of a plugin's build.
var testHelpers = []string{"internal/testwait"}

// TestPluginsImportOnlySDK: every plugin (each directory of plugins/, its
// subpackages, cmd mains and tests included) is built on the public SDK
// alone: no drover import outside sdk/ but the plugin's own packages (and,
// in its tests, the repository's test helpers).
func TestPluginsImportOnlySDK(t *testing.T) {
	const module = "github.com/drover-org/drover/"
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range dirs {
		if !d.IsDir() || notPlugins[d.Name()] {
			continue
		}
		own := "plugins/" + d.Name()
		err := filepath.WalkDir(d.Name(), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.Contains(path, "/testdata/") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				rest, ours := strings.CutPrefix(p, module)
				if ours && !strings.HasPrefix(rest, "sdk/") && rest != own && !strings.HasPrefix(rest, own+"/") &&
					!slices.Contains(pluginDeps[d.Name()], rest) &&
					!(strings.HasSuffix(path, "_test.go") && slices.Contains(testHelpers, rest)) {
					t.Errorf("%s imports %s; a plugin imports only %ssdk/... and its own packages", path, p, module)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no plugin source found")
	}
}
