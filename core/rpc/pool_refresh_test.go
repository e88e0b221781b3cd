package rpc

import (
	"testing"
	"time"
)

func TestPoolRefresh(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{
		{"closed by the pool", time.Hour},
		{"closed after grace", time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPool(nil)
			defer p.Close()
			first, err := p.Get("127.0.0.1:1")
			if err != nil {
				t.Fatal(err)
			}
			p.Refresh(tc.grace)
			second, err := p.Get("127.0.0.1:1")
			if err != nil {
				t.Fatal(err)
			}
			if first == second {
				t.Fatal("Get after Refresh returned the retired connection")
			}
			if again, _ := p.Get("127.0.0.1:1"); again != second {
				t.Fatal("the new connection is not shared")
			}
			if tc.grace < time.Second {
				waitFor(t, 10*time.Second, "the retired connection to close", func() bool {
					p.mu.Lock()
					defer p.mu.Unlock()
					return len(p.retired) == 0
				})
			}
		})
	}
}
