package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/state"
)

// stateMethodsWithErrors names the state store's methods whose last result
// is an error.
func stateMethodsWithErrors() map[string]bool {
	errType := reflect.TypeOf((*error)(nil)).Elem()
	out := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeOf(&state.StateStore{}), reflect.TypeOf(&state.StateSnapshot{})} {
		for i := 0; i < typ.NumMethod(); i++ {
			ft := typ.Method(i).Type
			if n := ft.NumOut(); n > 0 && ft.Out(n-1) == errType {
				out[typ.Method(i).Name] = true
			}
		}
	}
	return out
}

// A state read that fails must be handled: an error read as "not found"
// makes the server act on a wrong picture (skip an eval, keep a preemption,
// never arm a heartbeat timer). No call of a state method in this package
// may throw its error away, as `x, _ :=`, `_ =` or a bare call.
func TestStateErrorsAreNotDiscarded(t *testing.T) {
	methods := stateMethodsWithErrors()
	if !methods["JobByID"] || methods["Index"] {
		t.Fatalf("state method set looks wrong: %v", methods)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	stateCall := func(e ast.Expr) (string, bool) {
		call, ok := e.(*ast.CallExpr)
		if !ok {
			return "", false
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !methods[sel.Sel.Name] {
			return "", false
		}
		return sel.Sel.Name, true
	}
	var checked int
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if len(n.Rhs) != 1 {
					return true
				}
				m, ok := stateCall(n.Rhs[0])
				if !ok {
					return true
				}
				if id, ok := n.Lhs[len(n.Lhs)-1].(*ast.Ident); ok && id.Name == "_" {
					t.Errorf("%s: the error of %s is discarded", fset.Position(n.Pos()), m)
				}
			case *ast.ExprStmt:
				if m, ok := stateCall(n.X); ok {
					t.Errorf("%s: the error of %s is discarded", fset.Position(n.Pos()), m)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
