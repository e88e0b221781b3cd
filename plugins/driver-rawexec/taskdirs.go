package rawexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// Directory names of Nomad's task and allocation layout that a task writes.
var (
	taskWritableDirs  = []string{"local", "secrets", "tmp"} // in the task dir
	allocWritableDirs = []string{"data", "tmp"}             // in <alloc>/alloc
)

// shareTaskDirs makes the directories a task writes usable by the user it
// runs as: the client creates them as root. The task's own local/,
// secrets/ and tmp/ become the user's; the allocation's shared data/ and
// tmp/ become the user's for the first task of the group that runs as
// someone else, and sticky and world-writable (like /tmp) once tasks of
// two different users share them. The task directory itself stays root's,
// with the driver's exit file in it. Nothing is followed or changed
// recursively: a task must not be able to plant a link that the next
// start chowns for it.
func shareTaskDirs(cfg *driverpb.TaskConfig, cred *shimCredential) error {
	uid, gid := int(cred.UID), int(cred.GID)
	for _, name := range taskWritableDirs {
		if err := chownDir(filepath.Join(cfg.GetTaskDir(), name), uid, gid); err != nil {
			return err
		}
	}
	if cfg.GetAllocDir() == "" {
		return nil
	}
	for _, name := range allocWritableDirs {
		dir := filepath.Join(cfg.GetAllocDir(), "alloc", name)
		fi, err := os.Lstat(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("task dir %s: not a directory (%v)", dir, err)
		}
		owner := fi.Sys().(*syscall.Stat_t).Uid
		switch {
		case owner == 0:
			if err := os.Lchown(dir, uid, gid); err != nil {
				return fmt.Errorf("give %s to uid %d: %w", dir, uid, err)
			}
		case int(owner) != uid:
			if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
				return fmt.Errorf("share %s between task users: %w", dir, err)
			}
		}
	}
	return nil
}

func chownDir(dir string, uid, gid int) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("task dir %s: not a directory (%v)", dir, err)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return fmt.Errorf("give task dir %s to uid %d: %w", dir, uid, err)
	}
	return nil
}
