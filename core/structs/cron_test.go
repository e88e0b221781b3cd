package structs

import (
	"strings"
	"testing"
	"time"
)

func TestParseCron(t *testing.T) {
	from := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC) // a Tuesday
	tests := []struct {
		spec string
		want time.Time // zero: never fires
		err  string    // non-empty: refused, with this fragment
	}{
		{spec: "*/15 * * * *", want: from.Add(15 * time.Minute)},
		{spec: "*/15 * * * * *", want: from.Add(15 * time.Minute)},              // sixth field: year
		{spec: "0 30 12 * * * *", want: from.Add(30 * time.Minute)},             // seventh: seconds first
		{spec: "*/5 * * * * ? *", want: from.Add(5 * time.Second)},              // ? in day of week
		{spec: "0 0 0 ? * MON-FRI *", want: from.Add(12 * time.Hour)},           // names in ranges
		{spec: "0 0 L * *", want: time.Date(2030, 1, 31, 0, 0, 0, 0, time.UTC)}, // last day of month
		{spec: "@hourly", want: from.Add(time.Hour)},
		{spec: "@daily", want: from.Add(12 * time.Hour)},
		{spec: "@weekly", want: time.Date(2030, 1, 20, 0, 0, 0, 0, time.UTC)},
		{spec: "@monthly", want: time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC)},
		{spec: "@yearly", want: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)},
		{spec: "@annually", want: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)},
		{spec: "0 0 1 1 * 2029"}, // only in the past
		{spec: "0 0 30 2 *"},     // February 30th
		{spec: "* * * *", err: "has 4 fields; a cron expression has 5"},
		{spec: "0 0 0 * * * 2030 junk", err: "has 8 fields"}, // cronexpr drops the eighth unread
		{spec: "0 0 0 * * * 2030 2031 2032", err: "has 9 fields"},
		{spec: "@daily 0", err: "@daily"},
		{spec: "\t*/15  *\t* * *  ", want: from.Add(15 * time.Minute)}, // any white space separates fields
		{spec: "61 * * * *", err: "syntax error"},
		{spec: "", err: "empty"},
		{spec: strings.Repeat("1,", 200) + "1 * * * *", err: "at most 256"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			sched, err := ParseCron(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sched.Next(from); !got.Equal(tc.want) {
				t.Fatalf("Next(%s) = %s, want %s", from, got, tc.want)
			}
		})
	}
}

// FuzzParseCron: any expression is parsed or refused with an error, and a
// parsed one's Next never panics.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"*/5 * * * *", "0 0 L W * ? 2030", "@daily", "0 0 1#3 * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		sched, err := ParseCron(spec)
		if err != nil {
			return
		}
		_ = sched.Next(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	})
}
