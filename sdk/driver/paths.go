package driver

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/drover-org/drover/sdk/safefs"
)

// RelBeneath returns p, an absolute path beneath the trusted directory
// root (say a log base or the task dir beneath TaskConfig.alloc_dir),
// relative to root, for use with a safefs.Dir opened on root. A path
// outside root, or root itself, is refused with an error wrapping
// safefs.ErrUnsafePath.
func RelBeneath(root, p string) (string, error) {
	rel, err := filepath.Rel(root, p)
	if err != nil || !filepath.IsAbs(root) || !filepath.IsAbs(p) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("%w: not beneath %s", safefs.ErrUnsafePath, root)}
	}
	return rel, nil
}
