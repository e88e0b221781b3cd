package client

import (
	"net"
	"strings"
	"testing"
)

func TestDefaultRouteInterface(t *testing.T) {
	tests := []struct{ name, table, want string }{
		{"default route", "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n" +
			"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\n" +
			"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\n", "eth0"},
		{"lowest metric wins", "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n" +
			"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\n" +
			"eth1\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\n", "eth1"},
		{"none", "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n" +
			"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\n", ""},
	}
	for _, tc := range tests {
		if got := defaultRouteInterface(strings.NewReader(tc.table)); got != tc.want {
			t.Errorf("%s: defaultRouteInterface = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPickAddress(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	if got := pickAddress([]net.Addr{cidr("fe80::1/64"), cidr("2001:db8::1/64"), cidr("10.1.2.3/24")}); got.String() != "10.1.2.3" {
		t.Errorf("pickAddress = %v, want the IPv4 address", got)
	}
	if got := pickAddress([]net.Addr{cidr("fe80::1/64"), cidr("2001:db8::1/64")}); got.String() != "2001:db8::1" {
		t.Errorf("pickAddress = %v, want the global IPv6 address", got)
	}
	if got := pickAddress([]net.Addr{cidr("fe80::1/64")}); got != nil {
		t.Errorf("pickAddress = %v, want none", got)
	}
}

func TestNodeAddress(t *testing.T) {
	dev, ip, err := nodeAddress("", true, "/proc")
	if err != nil || !ip.IsLoopback() || dev == "" {
		t.Fatalf("loopback: %q %v %v, want the loopback address", dev, ip, err)
	}
	if _, _, err := nodeAddress("no-such-if0", false, "/proc"); err == nil || !strings.Contains(err.Error(), `network_interface "no-such-if0"`) {
		t.Errorf("unknown interface: err = %v", err)
	}
	if _, _, err := nodeAddress("", false, t.TempDir()); err == nil || !strings.Contains(err.Error(), "default route") {
		t.Errorf("no route table: err = %v", err)
	}
}
