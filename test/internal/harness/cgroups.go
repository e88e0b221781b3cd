package harness

import (
	"os"
	"path/filepath"
)

// RemoveTaskCgroups removes the raw_exec task cgroups of the allocations
// under a client data dir (<dataDir>/alloc/<alloc id>): a test that kills a
// non-dev client's shims and tasks with SIGKILL leaves their cgroups, empty,
// which only a shim or a driver would otherwise remove. rmdir removes only
// an empty cgroup; anything still running keeps its own.
func RemoveTaskCgroups(dataDir string) {
	allocs, _ := os.ReadDir(filepath.Join(dataDir, "alloc"))
	for _, al := range allocs {
		for _, pattern := range []string{
			"/sys/fs/cgroup/*/drover/" + al.Name() + ".*",
			"/sys/fs/cgroup/drover.slice/" + al.Name() + ".*",
		} {
			dirs, _ := filepath.Glob(pattern)
			for _, d := range dirs {
				_ = os.Remove(d)
			}
		}
	}
}
