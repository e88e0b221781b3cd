package structs

import (
	"fmt"
	"strings"
	"time"
	// A periodic job's time_zone is checked at submit and loaded again by
	// whichever server leads when it launches: the zone database goes in
	// the binary, so that a zone accepted by one server loads on all,
	// whatever zoneinfo their hosts have.
	_ "time/tzdata"

	"github.com/hashicorp/cronexpr"
)

// Cron expressions are read as Nomad reads them (hashicorp/cronexpr):
//
//   - 5 fields: minute hour day-of-month month day-of-week;
//   - 6 fields: the same and a year;
//   - 7 fields: a second, the five, and a year;
//   - @yearly (@annually), @monthly, @weekly, @daily and @hourly.
//
// Fields take lists, ranges, steps and names (JAN, MON), "?" for "any"
// in the day fields, L, W and # as in Quartz. A six-field expression is
// therefore not "seconds first" as in some cron libraries: "*/15 * * * * *"
// is every fifteen minutes, as Nomad's documentation writes it.

// MaxCronLength bounds a cron expression; real ones are a few dozen bytes.
const MaxCronLength = 256

// CronSchedule is a parsed cron expression.
type CronSchedule interface {
	// Next returns the first time strictly after from that the expression
	// matches, in from's location, or the zero time when none does.
	Next(from time.Time) time.Time
}

// ParseCron parses a cron expression (see above).
func ParseCron(spec string) (sched CronSchedule, err error) {
	if len(spec) > MaxCronLength {
		return nil, fmt.Errorf("the expression is %d bytes; at most %d are allowed", len(spec), MaxCronLength)
	}
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("the expression is empty")
	}
	// cronexpr reads the first seven fields and drops the rest unread, so
	// "0 0 * * * 2030 2031 junk" would run as if the junk were not there.
	// So does it after a macro ("@daily 0").
	fields := strings.Fields(spec)
	switch {
	case strings.HasPrefix(fields[0], "@") && len(fields) > 1:
		return nil, fmt.Errorf("%s stands alone: the expression has %d more fields after it", fields[0], len(fields)-1)
	case !strings.HasPrefix(fields[0], "@") && (len(fields) < 5 || len(fields) > 7):
		return nil, fmt.Errorf("the expression has %d fields; a cron expression has 5 (minute hour day-of-month month day-of-week), 6 (the five and a year) or 7 (a second, the five and a year)", len(fields))
	}
	// The parser is a third party's; a panic on odd input must not take
	// the server down with it.
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("the expression cannot be parsed")
		}
	}()
	expr, err := cronexpr.Parse(spec)
	if err != nil {
		return nil, err
	}
	return safeSchedule{expr}, nil
}

// safeSchedule turns a panic of the library's Next into "never".
type safeSchedule struct{ expr *cronexpr.Expression }

func (s safeSchedule) Next(from time.Time) (next time.Time) {
	defer func() {
		if r := recover(); r != nil {
			next = time.Time{}
		}
	}()
	return s.expr.Next(from)
}
