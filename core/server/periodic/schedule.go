package periodic

import (
	"fmt"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// The schedule: pure functions of jobs and times.

// maxWait bounds how long Run sleeps with nothing due.
const maxWait = time.Hour

// nextLaunch is the job's first launch strictly after after, in the
// job's time zone; false when its specs name none (or do not parse).
func nextLaunch(job *structs.Job, after time.Time) (time.Time, bool) {
	n, err := job.Periodic.Next(after)
	if err != nil || n.IsZero() {
		return time.Time{}, false
	}
	return n, true
}

// missedLaunch reports whether the job had a launch due after its last one
// (last, zero if never) and before now: no leader made it.
func missedLaunch(job *structs.Job, last, now time.Time) bool {
	if last.IsZero() {
		return false
	}
	missed, ok := nextLaunch(job, last)
	return ok && missed.Before(now)
}

// dueLaunch is one launch to make: the job and its scheduled time.
type dueLaunch struct {
	job *structs.Job
	at  time.Time
}

// due returns the launches whose time has come by now and how long until
// the next one (at most maxWait). It advances next in place: a launched
// job's entry moves to its next launch after now, or goes when there is
// none.
func due(jobs map[structs.NamespacedID]*structs.Job, next map[structs.NamespacedID]time.Time, now time.Time) ([]dueLaunch, time.Duration) {
	var out []dueLaunch
	wait := maxWait
	for id, at := range next {
		if !at.After(now) {
			out = append(out, dueLaunch{job: jobs[id], at: at})
			if n, ok := nextLaunch(jobs[id], now); ok {
				next[id] = n
			} else {
				delete(next, id)
			}
			continue
		}
		if d := at.Sub(now); d < wait {
			wait = d
		}
	}
	return out, wait
}

// childID names the child launched at unix second launch.
func childID(parent string, launch int64) string {
	return fmt.Sprintf("%s%s%d", parent, structs.PeriodicLaunchSuffix, launch)
}

// deriveChild is the child job of a periodic parent: a copy under the
// child's ID, neither periodic nor versioned, submitted at submitted.
func deriveChild(job *structs.Job, id string, submitted time.Time) *structs.Job {
	child := job.Copy()
	child.ID, child.Name, child.ParentID = id, id, job.ID
	child.Periodic = nil
	child.Status, child.StatusDescription = "", ""
	child.Version, child.CreateIndex, child.ModifyIndex, child.JobModifyIndex = 0, 0, 0, 0
	child.SubmitTime = submitted.UnixNano()
	return child
}
