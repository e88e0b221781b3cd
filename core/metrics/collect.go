package metrics

import "github.com/prometheus/client_golang/prometheus"

// Sample is one value a Func collector reports.
type Sample struct {
	Value  float64
	Labels []string // values of the Desc's variable labels, in order
}

// Gauge describes a scrape-time gauge.
type Gauge struct {
	Name, Help string
	Labels     []string
	// Counter reports the samples as counters (a total kept elsewhere,
	// such as a plugin's restart count); the name then ends in _total.
	Counter bool
	// Read returns the samples at scrape time; it runs on the scraping
	// goroutine and must be cheap and safe to call concurrently.
	Read func() []Sample
}

// funcCollector reports gauges read from components at scrape time, so
// that counts the components already keep cost nothing between scrapes.
type funcCollector struct {
	gauges []Gauge
	descs  []*prometheus.Desc
}

// NewGauges builds a collector of scrape-time gauges (names get the
// drover_ prefix).
func NewGauges(gauges ...Gauge) prometheus.Collector {
	c := &funcCollector{gauges: gauges}
	for _, g := range gauges {
		c.descs = append(c.descs, prometheus.NewDesc(namespace+"_"+g.Name, g.Help, g.Labels, nil))
	}
	return c
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	for i, g := range c.gauges {
		vt := prometheus.GaugeValue
		if g.Counter {
			vt = prometheus.CounterValue
		}
		for _, s := range g.Read() {
			ch <- prometheus.MustNewConstMetric(c.descs[i], vt, s.Value, s.Labels...)
		}
	}
}

// One is a single unlabelled sample.
func One(v float64) []Sample { return []Sample{{Value: v}} }
