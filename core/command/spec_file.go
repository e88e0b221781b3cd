package command

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// specFormat is how one kind of specification file (a namespace, a node
// pool) is parsed: its name in messages, its size bound, its JSON and HCL
// decoders, and the name and validation of the object it gives.
type specFormat[T any] struct {
	what      string // "namespace", "node pool"
	maxBytes  int64
	parseJSON func(filename string, src []byte) (T, error)
	parseHCL  func(filename string, src []byte) (T, error)
	name      func(T) string
	validate  func(T) error
}

// read reads a specification from path, or from standard input for "-",
// bounded by maxBytes, and parses it.
func (f specFormat[T]) read(in io.Reader, path string) (T, error) {
	src, err := readInput(in, path, f.maxBytes)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("reading %s file: %w", f.what, err)
	}
	name := path
	if path == "-" {
		name = "<stdin>"
	}
	return f.parse(name, src)
}

// parse decodes JSON when the file name ends in .json or the text starts
// with "{" (the API object, as the -json output prints it), HCL otherwise;
// errors name the file, line and column. The result has a name and is
// validated.
func (f specFormat[T]) parse(filename string, src []byte) (T, error) {
	var zero T
	decode := f.parseHCL
	if strings.HasSuffix(filename, ".json") || bytes.HasPrefix(bytes.TrimLeft(src, " \t\r\n"), []byte("{")) {
		decode = f.parseJSON
	}
	v, err := decode(filename, src)
	if err != nil {
		return zero, err
	}
	if f.name(v) == "" {
		return zero, fmt.Errorf("%s: the %s has no name", filename, f.what)
	}
	if err := f.validate(v); err != nil {
		return zero, fmt.Errorf("%s: %w", filename, err)
	}
	return v, nil
}
