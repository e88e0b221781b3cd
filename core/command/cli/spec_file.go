package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// SpecFormat is how one kind of specification file (a namespace, a node
// pool) is parsed: its name in messages, its size bound, its JSON and HCL
// decoders, and the name and validation of the object it gives.
type SpecFormat[T any] struct {
	What      string // "namespace", "node pool"
	MaxBytes  int64
	ParseJSON func(filename string, src []byte) (T, error)
	ParseHCL  func(filename string, src []byte) (T, error)
	Name      func(T) string
	Validate  func(T) error
}

// Read reads a specification from path, or from standard input for "-",
// bounded by maxBytes, and parses it.
func (f SpecFormat[T]) Read(in io.Reader, path string) (T, error) {
	src, err := ReadInput(in, path, f.MaxBytes)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("reading %s file: %w", f.What, err)
	}
	name := path
	if path == "-" {
		name = "<stdin>"
	}
	return f.Parse(name, src)
}

// Parse decodes JSON when the file name ends in .json or the text starts
// with "{" (the API object, as the -json output prints it), HCL otherwise;
// errors name the file, line and column. The result has a name and is
// validated.
func (f SpecFormat[T]) Parse(filename string, src []byte) (T, error) {
	var zero T
	decode := f.ParseHCL
	if strings.HasSuffix(filename, ".json") || bytes.HasPrefix(bytes.TrimLeft(src, " \t\r\n"), []byte("{")) {
		decode = f.ParseJSON
	}
	v, err := decode(filename, src)
	if err != nil {
		return zero, err
	}
	if f.Name(v) == "" {
		return zero, fmt.Errorf("%s: the %s has no name", filename, f.What)
	}
	if err := f.Validate(v); err != nil {
		return zero, fmt.Errorf("%s: %w", filename, err)
	}
	return v, nil
}
