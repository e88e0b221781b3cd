package rpc

import (
	"net"
	"testing"
)

func TestRaftLayerAdvertiseHostPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"s1:4647", true},
		{"10.0.0.7:4647", true},
		{"0.0.0.0:4647", false},
		{"s1", false},
		{":4647", false},
	} {
		l, err := NewRaftLayer(ln, HostPort(tc.addr), nil)
		if (err == nil) != tc.ok {
			t.Fatalf("%q: err = %v, want ok=%v", tc.addr, err, tc.ok)
		}
		if err == nil && l.Addr().String() != tc.addr {
			t.Fatalf("%q: Addr() = %q; Raft must store the address as written", tc.addr, l.Addr().String())
		}
	}
}
