//go:build !linux

package hostpath

func mountFlags(opts []string, readOnly bool) (uintptr, error) { return 0, errUnsupported }

func bindMount(src, dst string, flags uintptr) error { return errUnsupported }

func unmount(path string) error { return errUnsupported }

func fsStats(path string) (fsUsage, error) { return fsUsage{}, errUnsupported }
