package structs

import (
	"math"
	"strings"
	"testing"
)

// TestValidateLogConfig: a logs block the client could not honour is
// refused at submit naming the field (it was accepted, then silently
// replaced by the defaults on the client, or failed the task there when
// max_file_size overflowed in bytes); fields left out of JSON get
// Nomad's defaults.
func TestValidateLogConfig(t *testing.T) {
	job := func(lc *LogConfig, diskMB int) *Job {
		j := &Job{ID: "j", Type: "sysbatch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
			Name: "g", Tasks: []*Task{{Name: "t", Driver: "raw_exec", LogConfig: lc}},
		}}}
		if diskMB > 0 {
			j.TaskGroups[0].EphemeralDisk = &EphemeralDisk{SizeMB: diskMB}
		}
		j.Canonicalize()
		return j
	}
	for _, tc := range []struct {
		name   string
		lc     *LogConfig
		diskMB int
		want   string // "" when valid
	}{
		{"negative max_files", &LogConfig{MaxFiles: -1, MaxFileSizeMB: 1}, 0, `task "t": logs: max_files must be between 1 and 2147483647 (got -1)`},
		{"negative max_file_size", &LogConfig{MaxFiles: 2, MaxFileSizeMB: -1}, 0, `logs: max_file_size must be between 1 and 2147483647 MB (got -1)`},
		{"max_file_size overflowing bytes", &LogConfig{MaxFiles: 2, MaxFileSizeMB: math.MaxInt64}, 0, "max_file_size must be between"},
		{"max_files past 32 bits", &LogConfig{MaxFiles: math.MaxInt32 + 1, MaxFileSizeMB: 1}, 0, "max_files must be between"},
		{"logs larger than the disk", &LogConfig{MaxFiles: 100_000_000, MaxFileSizeMB: 10}, 0, "log storage (100000000 files of 10 MB = 1000000000 MB) must be less than the group's ephemeral_disk (300 MB)"},
		{"logs equal to the disk", &LogConfig{MaxFiles: 10, MaxFileSizeMB: 30}, 300, "must be less than"},
		{"fields left out", &LogConfig{MaxFiles: 4}, 0, ""},
		{"as in the issue", &LogConfig{MaxFiles: 2, MaxFileSizeMB: 1}, 0, ""},
		{"disabled", &LogConfig{Disabled: true}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := job(tc.lc, tc.diskMB)
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if lc := j.TaskGroups[0].Tasks[0].LogConfig; lc.MaxFiles < 1 || lc.MaxFileSizeMB < 1 {
					t.Errorf("canonicalized logs %+v, want every field at least 1", lc)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
