package csi

import (
	"strings"
	"testing"
	"time"
)

// A socket path longer than a unix socket allows is refused, saying what
// to do about it.
func TestCSISocketPathBounded(t *testing.T) {
	p := NewPlugins(nil, "/"+strings.Repeat("d", 100), time.Second, time.Second, nil, func() {})
	if _, err := p.Prepare("0123456789", "task"); err == nil || !strings.Contains(err.Error(), "use a shorter data_dir") {
		t.Errorf("err = %v", err)
	}
}
