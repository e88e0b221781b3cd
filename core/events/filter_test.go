package events

import (
	"strings"
	"testing"
)

func TestParseTopics(t *testing.T) {
	tests := []struct {
		in      []string
		want    map[string][]string
		wantErr string
	}{
		{nil, map[string][]string{"*": {"*"}}, ""},
		{[]string{"Job"}, map[string][]string{"Job": {"*"}}, ""},
		{[]string{"Job:web", "Job:db", "Job:web"}, map[string][]string{"Job": {"web", "db"}}, ""},
		{[]string{"*:*"}, map[string][]string{"*": {"*"}}, ""},
		{[]string{"Bogus:x"}, nil, `unknown topic "Bogus"`},
		{[]string{":x"}, nil, "expected Topic or Topic:Key"},
		{[]string{"Job:"}, nil, "expected Topic or Topic:Key"},
		{make([]string, MaxTopics+1), nil, "at most 64 topic parameters"},
	}
	for _, tt := range tests {
		got, err := ParseTopics(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTopics(%q) err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTopics(%q): %v", tt.in, err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("ParseTopics(%q) = %v, want %v", tt.in, got, tt.want)
		}
		for k, v := range tt.want {
			if strings.Join(got[k], ",") != strings.Join(v, ",") {
				t.Errorf("ParseTopics(%q)[%s] = %v, want %v", tt.in, k, got[k], v)
			}
		}
	}
}

func TestFilterMatch(t *testing.T) {
	job := &Event{Topic: TopicJob, Key: "web", Namespace: "prod"}
	alloc := &Event{Topic: TopicAllocation, Key: "a1", Namespace: "prod", FilterKeys: []string{"web"}}
	node := &Event{Topic: TopicNode, Key: "n1"}
	denyProd := func(e *Event) bool { return e.Namespace != "prod" }
	tests := []struct {
		name   string
		f      *Filter
		e      *Event
		passes bool
	}{
		{"nil filter", nil, job, true},
		{"all topics", &Filter{Topics: map[string][]string{"*": {"*"}}}, job, true},
		{"topic match", &Filter{Topics: map[string][]string{"Job": {"*"}}}, job, true},
		{"other topic", &Filter{Topics: map[string][]string{"Node": {"*"}}}, job, false},
		{"key match", &Filter{Topics: map[string][]string{"Job": {"web"}}}, job, true},
		{"key mismatch", &Filter{Topics: map[string][]string{"Job": {"db"}}}, job, false},
		{"filter key match", &Filter{Topics: map[string][]string{"Allocation": {"web"}}}, alloc, true},
		{"wildcard topic with key", &Filter{Topics: map[string][]string{"*": {"web"}}}, alloc, true},
		{"namespace match", &Filter{Namespace: "prod"}, job, true},
		{"namespace mismatch", &Filter{Namespace: "default"}, job, false},
		{"namespace wildcard", &Filter{Namespace: "*"}, job, true},
		{"no-namespace event passes a namespace filter", &Filter{Namespace: "default"}, node, true},
		{"ACL denies", &Filter{Namespace: "*", Allow: denyProd}, alloc, false},
		{"ACL allows", &Filter{Namespace: "*", Allow: denyProd}, node, true},
	}
	for _, tt := range tests {
		if got := tt.f.Match(tt.e); got != tt.passes {
			t.Errorf("%s: Match = %v, want %v", tt.name, got, tt.passes)
		}
	}
}

func TestFilterApply(t *testing.T) {
	b := &Batch{Index: 5, Events: []*Event{
		{Topic: TopicNode, Key: "n"}, {Topic: TopicJob, Key: "j"}, {Topic: TopicNode, Key: "m"},
	}}
	all := &Filter{}
	if got := all.Apply(b); got != b {
		t.Fatal("a filter passing everything must return the batch itself")
	}
	nodes := &Filter{Topics: map[string][]string{"Node": {"*"}}}
	got := nodes.Apply(b)
	if got == nil || len(got.Events) != 2 || got.Events[0].Key != "n" || got.Events[1].Key != "m" || got.Index != 5 {
		t.Fatalf("Apply(nodes) = %+v", got)
	}
	if len(b.Events) != 3 {
		t.Fatal("Apply changed the shared batch")
	}
	if got := (&Filter{Topics: map[string][]string{"Evaluation": {"*"}}}).Apply(b); got != nil {
		t.Fatalf("Apply(no match) = %+v, want nil", got)
	}
}
