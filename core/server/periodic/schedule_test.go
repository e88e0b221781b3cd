package periodic

import (
	"slices"
	"testing"
	"time"
	_ "time/tzdata" // time_zone tests must not depend on the host's zoneinfo

	"github.com/drover-org/drover/core/structs"
)

func TestPeriodicNextTimeZone(t *testing.T) {
	winter := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	summer := time.Date(2030, 7, 15, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		specs []string
		tz    string
		from  time.Time
		want  time.Time
	}{
		{"utc", []string{"0 9 * * *"}, "UTC", winter, time.Date(2030, 1, 16, 9, 0, 0, 0, time.UTC)},
		{"new york winter (UTC-5)", []string{"0 9 * * *"}, "America/New_York", winter, time.Date(2030, 1, 15, 14, 0, 0, 0, time.UTC)},
		{"new york summer (UTC-4)", []string{"0 9 * * *"}, "America/New_York", summer, time.Date(2030, 7, 15, 13, 0, 0, 0, time.UTC)},
		{"tokyo, later today", []string{"0 22 * * *"}, "Asia/Tokyo", winter, time.Date(2030, 1, 15, 13, 0, 0, 0, time.UTC)},
		{"earliest of several crons", []string{"0 23 * * *", "30 12 * * *"}, "UTC", winter, time.Date(2030, 1, 15, 12, 30, 0, 0, time.UTC)},
		{"strictly after from", []string{"0 12 * * *"}, "UTC", winter, time.Date(2030, 1, 16, 12, 0, 0, 0, time.UTC)},
		// As Nomad reads them: a sixth field is a year, a seventh puts
		// seconds first.
		{"six fields: minutes and a year", []string{"*/10 * * * * *"}, "UTC", winter, winter.Add(10 * time.Minute)},
		{"six fields: a later year", []string{"0 0 1 1 * 2031"}, "UTC", winter, time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"seven fields: seconds", []string{"*/5 * * * * ? *"}, "UTC", winter, winter.Add(5 * time.Second)},
		{"question mark in day of month", []string{"0 0 ? * MON"}, "UTC", winter, time.Date(2030, 1, 21, 0, 0, 0, 0, time.UTC)},
		{"@weekly", []string{"@weekly"}, "UTC", winter, time.Date(2030, 1, 20, 0, 0, 0, 0, time.UTC)},
		{"@annually", []string{"@annually"}, "UTC", winter, time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"no launch ever", []string{"0 0 30 2 *"}, "UTC", winter, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &structs.PeriodicConfig{Enabled: true, Specs: tc.specs, TimeZone: tc.tz}
			got, err := p.Next(tc.from)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) {
				t.Fatalf("Next = %s, want %s", got.UTC(), tc.want)
			}
			n, ok := nextLaunch(&structs.Job{Periodic: p}, tc.from)
			if ok != !tc.want.IsZero() || !n.Equal(tc.want) {
				t.Fatalf("nextLaunch = %s %v, want %s", n.UTC(), ok, tc.want)
			}
		})
	}
	if _, err := (&structs.PeriodicConfig{Spec: "0 9 * * *", TimeZone: "Mars/Olympus"}).Next(winter); err == nil {
		t.Fatal("unknown time zone accepted")
	}
	if _, ok := nextLaunch(&structs.Job{Periodic: &structs.PeriodicConfig{Spec: "0 9 * * *", TimeZone: "Mars/Olympus"}}, winter); ok {
		t.Fatal("a launch in an unknown time zone")
	}
}

func cronJob(id, spec, tz string) *structs.Job {
	return &structs.Job{ID: id, Namespace: structs.DefaultNamespace,
		Periodic: &structs.PeriodicConfig{Enabled: true, Spec: spec, TimeZone: tz}}
}

func key(id string) structs.NamespacedID {
	return structs.NamespacedID{ID: id, Namespace: structs.DefaultNamespace}
}

func TestDue(t *testing.T) {
	at := func(h, m, s int) time.Time { return time.Date(2030, 1, 15, h, m, s, 0, time.UTC) }
	hourly, daily := cronJob("hourly", "0 * * * *", ""), cronJob("daily", "0 9 * * *", "America/New_York")
	never := cronJob("never", "0 0 1 1 * 2030", "") // its only launch is past
	cases := []struct {
		name     string
		next     map[string]time.Time
		now      time.Time
		want     []string // "id@hh:mm" of due launches, sorted
		wantNext map[string]time.Time
		wait     time.Duration
	}{
		{"nothing due: wait for the earliest", map[string]time.Time{"hourly": at(11, 0, 0), "daily": at(14, 0, 0)}, at(10, 30, 0),
			nil, map[string]time.Time{"hourly": at(11, 0, 0), "daily": at(14, 0, 0)}, 30 * time.Minute},
		{"the wait is capped", map[string]time.Time{"daily": at(14, 0, 0)}, at(10, 30, 0),
			nil, map[string]time.Time{"daily": at(14, 0, 0)}, time.Hour},
		{"nothing tracked", map[string]time.Time{}, at(10, 30, 0), nil, map[string]time.Time{}, time.Hour},
		{"due exactly now, named after its time", map[string]time.Time{"hourly": at(11, 0, 0)}, at(11, 0, 0),
			[]string{"hourly@11:00"}, map[string]time.Time{"hourly": at(12, 0, 0)}, time.Hour},
		{"late launch keeps its scheduled time, next is after now", map[string]time.Time{"hourly": at(11, 0, 0), "daily": at(14, 0, 0)}, at(13, 20, 0),
			[]string{"hourly@11:00"}, map[string]time.Time{"hourly": at(14, 0, 0), "daily": at(14, 0, 0)}, 40 * time.Minute},
		{"two due at once", map[string]time.Time{"hourly": at(14, 0, 0), "daily": at(14, 0, 0)}, at(14, 0, 1),
			[]string{"daily@14:00", "hourly@14:00"}, map[string]time.Time{"hourly": at(15, 0, 0), "daily": at(14, 0, 0).AddDate(0, 0, 1)}, time.Hour},
		{"a job without another launch is dropped", map[string]time.Time{"never": at(0, 0, 0).AddDate(0, 0, -14)}, at(10, 0, 0),
			[]string{"never@00:00"}, map[string]time.Time{}, time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs := map[structs.NamespacedID]*structs.Job{key("hourly"): hourly, key("daily"): daily, key("never"): never}
			next := map[structs.NamespacedID]time.Time{}
			for id, at := range tc.next {
				next[key(id)] = at
			}
			launches, wait := due(jobs, next, tc.now)
			var got []string
			for _, l := range launches {
				got = append(got, l.job.ID+"@"+l.at.UTC().Format("15:04"))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || wait != tc.wait {
				t.Fatalf("due = %v, wait %s; want %v, %s", got, wait, tc.want, tc.wait)
			}
			if len(next) != len(tc.wantNext) {
				t.Fatalf("next = %v, want %v", next, tc.wantNext)
			}
			for id, want := range tc.wantNext {
				if !next[key(id)].Equal(want) {
					t.Fatalf("next[%s] = %s, want %s", id, next[key(id)].UTC(), want)
				}
			}
		})
	}
}

func TestMissedLaunch(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2030, 1, 15, h, m, 0, 0, time.UTC) }
	hourly := cronJob("hourly", "0 * * * *", "")
	for _, tc := range []struct {
		name      string
		job       *structs.Job
		last, now time.Time
		want      bool
	}{
		{"never launched", hourly, time.Time{}, at(10, 30), false},
		{"launched at the last slot", hourly, at(10, 0), at(10, 30), false},
		{"a slot passed since", hourly, at(9, 0), at(10, 30), true},
		{"the slot is exactly now", hourly, at(9, 0), at(10, 0), false},
		{"in the job's time zone", cronJob("ny", "0 9 * * *", "America/New_York"), at(14, 0).AddDate(0, 0, -1), at(14, 30), true},
		{"no launch after the last", cronJob("once", "0 0 1 1 * 2030", ""), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), at(10, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := missedLaunch(tc.job, tc.last, tc.now); got != tc.want {
				t.Fatalf("missedLaunch = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeriveChild(t *testing.T) {
	parent := cronJob("p", "0 * * * *", "")
	parent.Version, parent.CreateIndex, parent.ModifyIndex, parent.JobModifyIndex = 3, 10, 20, 15
	parent.Status, parent.StatusDescription, parent.Priority = structs.JobStatusRunning, "ok", 70
	at := time.Date(2030, 1, 15, 10, 0, 0, 0, time.UTC)
	id := childID("p", at.Unix())
	if id != "p/periodic-1894701600" || !structs.IsPeriodicChild("p", id) {
		t.Fatalf("child ID %q", id)
	}
	c := deriveChild(parent, id, at.Add(time.Second))
	if c.ID != id || c.Name != id || c.ParentID != "p" || c.Periodic != nil || c.Status != "" || c.StatusDescription != "" ||
		c.Version != 0 || c.CreateIndex != 0 || c.ModifyIndex != 0 || c.JobModifyIndex != 0 ||
		c.SubmitTime != at.Add(time.Second).UnixNano() || c.Priority != 70 {
		t.Fatalf("child = %+v", c)
	}
	if parent.Periodic == nil || parent.ID != "p" || parent.Version != 3 {
		t.Fatal("the parent was modified")
	}
}
