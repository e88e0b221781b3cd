package structs

import (
	"encoding/json"
	"testing"
)

// A JSON job's group without Count runs one allocation, as Nomad
// canonicalizes it; an explicit 0 stays 0; a Copy keeps either.
func TestTaskGroupJSONCount(t *testing.T) {
	cases := []struct {
		name, body string
		want       int
	}{
		{"absent", `{"Name":"g"}`, 1},
		{"zero", `{"Name":"g","Count":0}`, 0},
		{"three", `{"Name":"g","Count":3}`, 3},
		{"null", `{"Name":"g","Count":null}`, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var job Job
			if err := json.Unmarshal([]byte(`{"ID":"j","TaskGroups":[`+tc.body+`]}`), &job); err != nil {
				t.Fatal(err)
			}
			if got := job.TaskGroups[0].Count; got != tc.want {
				t.Fatalf("Count = %d; want %d", got, tc.want)
			}
			if got := job.Copy().TaskGroups[0].Count; got != tc.want {
				t.Fatalf("Copy's Count = %d; want %d", got, tc.want)
			}
			if job.TaskGroups[0].Name != "g" {
				t.Fatalf("Name = %q; the other fields must decode too", job.TaskGroups[0].Name)
			}
		})
	}
	var tg TaskGroup
	if err := json.Unmarshal([]byte(`{"Count":"x"}`), &tg); err == nil {
		t.Fatal("a string Count decoded without error")
	}
}
