//go:build !linux

package hostpath_test

import "testing"

// requireMounts skips: bind mounts need Linux.
func requireMounts(t *testing.T) {
	t.Helper()
	t.Skip("bind mounts need Linux")
}

// assertNoVolumeMounts has nothing to check off Linux.
func assertNoVolumeMounts(t *testing.T, dir string) {}
