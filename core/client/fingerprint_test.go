package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestParseCPUInfo(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		cores int
		mhz   float64
		model string
	}{
		{"x86", "processor\t: 0\nmodel name\t: Fancy CPU\ncpu MHz\t\t: 2400.000\n\nprocessor\t: 1\nmodel name\t: Fancy CPU\ncpu MHz\t\t: 2600.500\n", 2, 2600.5, "Fancy CPU"},
		{"no MHz (arm)", "processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\n", 2, 0, ""},
		{"empty", "", 0, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cores, mhz, model := parseCPUInfo(strings.NewReader(tc.in))
			if cores != tc.cores || mhz != tc.mhz || model != tc.model {
				t.Fatalf("got %d, %v, %q; want %d, %v, %q", cores, mhz, model, tc.cores, tc.mhz, tc.model)
			}
		})
	}
}

func TestParseMemInfo(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"MemTotal:       16384 kB\nMemFree: 1 kB\n", 16384 * 1024, true},
		{"MemFree: 1 kB\n", 0, false},
		{"MemTotal: lots kB\n", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseMemInfo(strings.NewReader(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseMemInfo(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseOSRelease(t *testing.T) {
	id, ver := parseOSRelease(strings.NewReader("NAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID=\"13\"\n"))
	if id != "debian" || ver != "13" {
		t.Fatalf("got %q %q", id, ver)
	}
}

func TestFingerprintHost(t *testing.T) {
	proc := t.TempDir()
	files := map[string]string{
		"cpuinfo":              "processor : 0\ncpu MHz : 2000.0\nprocessor : 1\ncpu MHz : 2000.0\n",
		"meminfo":              "MemTotal: 2097152 kB\n",
		"sys/kernel/osrelease": "6.1.0-test\n",
	}
	for name, content := range files {
		p := filepath.Join(proc, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := fingerprintHost(proc, t.TempDir(), "9.9.9")
	want := map[string]string{
		"cpu.numcores": "2", "cpu.frequency": "2000", "cpu.totalcompute": "4000",
		"memory.totalbytes": "2147483648", "kernel.version": "6.1.0-test", "kernel.name": runtime.GOOS,
		"cpu.arch": runtime.GOARCH, "drover.version": "9.9.9", "nomad.version": "9.9.9",
	}
	for k, v := range want {
		if f.Attributes[k] != v {
			t.Errorf("%s = %q; want %q", k, f.Attributes[k], v)
		}
	}
	if f.Resources.Cpu.CpuShares != 4000 || f.Resources.Cpu.TotalCpuCores != 2 || f.Resources.Memory.MemoryMB != 2048 {
		t.Errorf("resources = %+v", f.Resources)
	}
	if f.Resources.Disk.DiskMB <= 0 || f.Attributes["unique.storage.bytesfree"] == "" {
		t.Errorf("disk = %d MB, attrs %v", f.Resources.Disk.DiskMB, f.Attributes)
	}

	// Without cpuinfo MHz: 1000 MHz per core.
	if err := os.WriteFile(filepath.Join(proc, "cpuinfo"), []byte("processor : 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f := fingerprintHost(proc, t.TempDir(), "x"); f.Attributes["cpu.totalcompute"] != "1000" || f.Resources.Cpu.CpuShares != 1000 {
		t.Errorf("fallback totalcompute = %s", f.Attributes["cpu.totalcompute"])
	}
}

// brokenDriver fails its fingerprint.
type brokenDriver struct{ driver.Driver }

func (brokenDriver) Fingerprint(context.Context) (*driverpb.FingerprintResponse, error) {
	return nil, errors.New("plugin crashed")
}

func TestFingerprintDrivers(t *testing.T) {
	p := fakeProvider{"fake": newFakeDriver(newFakeWorld()), "broken": brokenDriver{}, "denied": newFakeDriver(newFakeWorld())}
	infos, attrs := fingerprintDrivers(context.Background(), p, driverFilter(map[string]string{"driver.denylist": "denied"}))
	if d := infos["fake"]; d == nil || !d.Detected || !d.Healthy || d.Attributes["driver.fake"] != "1" {
		t.Errorf("fake = %+v", d)
	}
	if d := infos["broken"]; d == nil || d.Detected || !strings.Contains(d.HealthDescription, "plugin crashed") {
		t.Errorf("broken = %+v", d)
	}
	if _, ok := infos["denied"]; ok {
		t.Error("denylisted driver fingerprinted")
	}
	if attrs["driver.fake"] != "1" || len(attrs) != 1 {
		t.Errorf("attrs = %v", attrs)
	}
}

func TestDriverFilter(t *testing.T) {
	allow := driverFilter(map[string]string{"driver.allowlist": "raw_exec, exec"})
	if !allow("raw_exec") || !allow("exec") || allow("docker") {
		t.Error("allowlist not applied")
	}
	all := driverFilter(nil)
	if !all("anything") {
		t.Error("no lists must allow every driver")
	}
}

func TestComputedClass(t *testing.T) {
	base := func() *structs.Node {
		return &structs.Node{Datacenter: "dc1", NodeClass: "c", NodePool: "default",
			Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": "a"},
			Meta:       map[string]string{"rack": "1"},
			Drivers:    map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}}}
	}
	a, b := base(), base()
	b.Attributes["unique.hostname"] = "b"
	if computedClass(a) != computedClass(b) {
		t.Error("unique attributes changed the class")
	}
	for name, mutate := range map[string]func(n *structs.Node){
		"datacenter": func(n *structs.Node) { n.Datacenter = "dc2" },
		"attribute":  func(n *structs.Node) { n.Attributes["kernel.name"] = "darwin" },
		"meta":       func(n *structs.Node) { n.Meta["rack"] = "2" },
		"driver":     func(n *structs.Node) { n.Drivers["raw_exec"].Healthy = false },
	} {
		n := base()
		mutate(n)
		if computedClass(n) == computedClass(a) {
			t.Errorf("changing %s kept the class", name)
		}
	}
}
