package cli

import (
	"fmt"
	"io"
	"os"
)

// ReadInput reads the file at path, or in for "-", up to limit bytes;
// more is an error that names the file ("<stdin>" for "-"). Every file a
// command sends on (policy rules, namespace specs, secrets) is read
// through it, so none is read unbounded.
func ReadInput(in io.Reader, path string, limit int64) ([]byte, error) {
	name := path
	if path == "-" {
		name = "<stdin>"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	b, err := io.ReadAll(io.LimitReader(in, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: the file is larger than %d bytes", name, limit)
	}
	return b, nil
}
