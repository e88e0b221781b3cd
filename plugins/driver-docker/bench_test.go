package docker

import (
	"context"
	"testing"
	"time"
)

// BenchmarkStartTask measures the driver alone: StartTask (image present,
// container created and started) to its return, and StopTask plus
// DestroyTask (untimed) after each.
func BenchmarkStartTask(b *testing.B) {
	needEngine(b)
	cfg, err := ParsePluginConfig([]byte(`{"gc":{"image":false}}`))
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(nil, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Shutdown()
	ctx := context.Background()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tc := shTask(b, "bench", "sleep 1000")
		b.StartTimer()
		start := time.Now()
		if _, err := d.StartTask(ctx, tc); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := d.StopTask(ctx, tc.GetId(), 0, ""); err != nil {
			b.Fatal(err)
		}
		if err := d.DestroyTask(ctx, tc.GetId(), true); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/start")
}
