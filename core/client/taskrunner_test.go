package client

import (
	"testing"
	"time"
)

func TestCapKillTimeout(t *testing.T) {
	for _, c := range []struct{ d, limit, want time.Duration }{
		{5 * time.Second, 30 * time.Second, 5 * time.Second},
		{time.Minute, 30 * time.Second, 30 * time.Second},
		{time.Minute, 0, time.Minute},
		{30 * time.Second, 30 * time.Second, 30 * time.Second},
	} {
		if got := capKillTimeout(c.d, c.limit); got != c.want {
			t.Errorf("capKillTimeout(%v, %v) = %v, want %v", c.d, c.limit, got, c.want)
		}
	}
}
