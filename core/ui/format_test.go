package ui

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestExplainFailure(t *testing.T) {
	cases := []struct {
		name string
		m    *structs.AllocMetric
		want string
	}{
		{"nil", nil, ""},
		{"no reason recorded", &structs.AllocMetric{NodesEvaluated: 3}, "1 allocation could not be placed"},
		{"exhausted and filtered", &structs.AllocMetric{NodesEvaluated: 8, CoalescedFailures: 1, NodesExhausted: 3,
			DimensionExhausted: map[string]int{"memory": 3}, ConstraintFiltered: map[string]int{"${attr.kernel.name} = windows": 5}},
			"2 allocations could not be placed: memory exhausted on 3 nodes; constraint ${attr.kernel.name} = windows filtered 5 nodes"},
		{"exhausted without a dimension", &structs.AllocMetric{NodesEvaluated: 1, NodesExhausted: 1},
			"1 allocation could not be placed: resources exhausted on 1 node"},
		{"no nodes", &structs.AllocMetric{NodePool: "gpu", NodesAvailable: map[string]int{"dc2": 0, "dc1": 4}},
			"1 allocation could not be placed: node pool gpu has no nodes; no nodes were eligible for evaluation; no nodes are available in datacenter dc2"},
		{"sorted reasons, classes and quota", &structs.AllocMetric{NodesEvaluated: 9,
			DimensionExhausted: map[string]int{"memory": 2, "cpu": 1},
			ClassFiltered:      map[string]int{"small": 4}, ClassExhausted: map[string]int{"large": 2}, QuotaExhausted: []string{"team-q"}},
			"1 allocation could not be placed: cpu exhausted on 1 node; memory exhausted on 2 nodes; node class small filtered 4 nodes; node class large exhausted on 2 nodes; quota team-q reached"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := explainFailure(c.m); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestNewBar(t *testing.T) {
	cases := []struct {
		name   string
		counts map[string]int
		label  string
		widths map[string]int
	}{
		{"empty", nil, "no allocations", nil},
		{"one status", map[string]int{"running": 4}, "4 running", map[string]int{"running": 100}},
		{"ordered by status, not map", map[string]int{"failed": 1, "running": 3}, "3 running, 1 failed", map[string]int{"running": 75, "failed": 25}},
		// A sliver still shows: 1 of 1000 is 1%, not 0%.
		{"sliver", map[string]int{"running": 999, "lost": 1}, "999 running, 1 lost", map[string]int{"running": 99, "lost": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBar(c.counts)
			if b.Label != c.label {
				t.Errorf("label %q, want %q", b.Label, c.label)
			}
			if len(b.Segments) != len(c.widths) {
				t.Fatalf("segments %+v, want %v", b.Segments, c.widths)
			}
			for _, s := range b.Segments {
				if s.Width != c.widths[s.Status] {
					t.Errorf("%s width %d, want %d", s.Status, s.Width, c.widths[s.Status])
				}
			}
		})
	}
}

func TestJobURL(t *testing.T) {
	cases := []struct{ ns, id, want string }{
		{"default", "web", "/ui/jobs/default/web"},
		{"default", "batch/periodic-1700000000", "/ui/jobs/default/batch/periodic-1700000000"},
		{"team a", "a?b#c", "/ui/jobs/team%20a/a%3Fb%23c"},
		{"default", "<script>", "/ui/jobs/default/%3Cscript%3E"},
	}
	for _, c := range cases {
		if got := jobURL(c.ns, c.id); got != c.want {
			t.Errorf("jobURL(%q, %q) = %q, want %q", c.ns, c.id, got, c.want)
		}
	}
}

func TestNewUsage(t *testing.T) {
	cases := []struct {
		used, total int64
		want        int
	}{{0, 0, 0}, {1000, 4000, 25}, {5000, 4000, 100}, {0, 100, 0}}
	for _, c := range cases {
		if got := newUsage("CPU", "MHz", c.used, c.total).Percent; got != c.want {
			t.Errorf("usage %d/%d = %d%%, want %d%%", c.used, c.total, got, c.want)
		}
	}
}

func TestParseMeta(t *testing.T) {
	cases := []struct {
		name, text string
		want       map[string]string
		err        string
	}{
		{"empty", "", nil, ""},
		{"pairs, spaces and blank lines", " who = world \n\nwhen=now\r\n", map[string]string{"who": "world", "when": "now"}, ""},
		{"value with =", "q=a=b", map[string]string{"q": "a=b"}, ""},
		{"empty value", "k=", map[string]string{"k": ""}, ""},
		{"no =", "who", nil, "Meta line 1: write key=value."},
		{"no key", "ok=1\n=x", nil, "Meta line 2: write key=value."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseMeta(c.text)
			if c.err != "" {
				if err == nil || err.Error() != c.err || errStatus(err) != 400 {
					t.Fatalf("err %v, want 400 %q", err, c.err)
				}
				return
			}
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("%v, %v; want %v", got, err, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestHealthyOfAndActionURL(t *testing.T) {
	cases := []struct{ got, want string }{
		{healthyOf(2, 0), "2 healthy"},
		{healthyOf(1, 3), "1 of 3 healthy"},
		{actionURL("job-stop", "team", "a/b"), "/ui/actions/job-stop?job=a%2Fb&namespace=team"},
		{actionURL("deployment-fail", "", "d1"), "/ui/actions/deployment-fail?deployment=d1"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

func TestDetailFailure(t *testing.T) {
	d := detailFailure("g", &structs.AllocMetric{NodesEvaluated: 1, NodesExhausted: 1, DimensionExhausted: map[string]int{"cpu": 1}})
	want := []string{"1 node was evaluated", "1 node was too full (resources exhausted)", `dimension "cpu" exhausted on 1 node`}
	if d.Group != "g" || d.Summary != "1 allocation could not be placed: cpu exhausted on 1 node" || len(d.Facts) != len(want) {
		t.Fatalf("%+v", d)
	}
	for i, w := range want {
		if d.Facts[i] != w {
			t.Errorf("fact %d: %q, want %q", i, d.Facts[i], w)
		}
	}
}

// TestBarHTML: the bar drawn in Go is the markup the template drew, with
// every text escaped.
func TestBarHTML(t *testing.T) {
	cases := []struct {
		name string
		bar  bar
		want string
	}{
		{"two statuses", newBar(map[string]int{"running": 3, "failed": 1}),
			`<div class="bar" role="img" aria-label="3 running, 1 failed"><span class="seg running w75" title="3 running"></span>` +
				`<span class="seg failed w25" title="1 failed"></span></div><span class="barlabel">3 running, 1 failed</span>`},
		{"empty", newBar(nil), `<div class="bar" role="img" aria-label="no allocations"></div><span class="barlabel">no allocations</span>`},
		{"hostile text", bar{Label: `<b>"x"</b> & 'y'`, Segments: []segment{{Status: `a" onclick="z`, N: 1, Width: 100}}},
			`<div class="bar" role="img" aria-label="&lt;b&gt;&#34;x&#34;&lt;/b&gt; &amp; &#39;y&#39;">` +
				`<span class="seg a&#34; onclick=&#34;z w100" title="1 a&#34; onclick=&#34;z"></span></div>` +
				`<span class="barlabel">&lt;b&gt;&#34;x&#34;&lt;/b&gt; &amp; &#39;y&#39;</span>`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(c.bar.HTML()); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}
