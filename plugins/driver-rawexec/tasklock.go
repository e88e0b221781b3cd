package rawexec

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// The supervisor holds an exclusive flock on a task's directory from before
// it reports the task's start until after it has written the task's exit
// file. One supervisor serves many tasks, so its being alive says nothing
// about one task; the lock does: a driver that recovers a task (and is not
// linked to the supervisor that runs it) knows that an exit file missing
// while the lock is free will never come, and the kernel frees the lock
// of a supervisor that dies. The task does not inherit the descriptor.

// taskLockWait bounds how long a start waits for the lock a previous run
// of the task in the same directory still holds (its cleanup).
const taskLockWait = 10 * time.Second

// lockTaskDir takes the task directory's lock for the supervisor and
// returns the descriptor that holds it.
func lockTaskDir(dir string) (int, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return -1, fmt.Errorf("open task directory to lock it: %w", err)
	}
	deadline := time.Now().Add(taskLockWait)
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = syscall.Close(fd)
			return -1, fmt.Errorf("lock task directory %s: %w", dir, err)
		}
		if time.Now().After(deadline) {
			_ = syscall.Close(fd)
			return -1, fmt.Errorf("lock task directory %s: still held by another process after %v", dir, taskLockWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// taskDirLocked reports whether some supervisor holds the lock of the task
// directory dir. A directory that is gone is not locked.
func taskDirLocked(dir string) bool {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	// A shared lock conflicts with the supervisor's exclusive one only;
	// it goes with the descriptor.
	err = syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB)
	return errors.Is(err, syscall.EWOULDBLOCK)
}
