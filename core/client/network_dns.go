package client

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// The group network's dns block. In an isolated mode (bridge, none,
// cni/<name>) the client writes the allocation's resolv.conf from it,
// <alloc dir>/resolv.conf (root-owned, beside the task directories and
// out of every task's reach), and gives drivers both the block and the
// file: exec binds the file at the task's /etc/resolv.conf, docker sets
// the block on the allocation's pause container. In host mode only the
// block goes to drivers, which only docker applies (as in Nomad).

const (
	resolvConfName = "resolv.conf"
	// hostResolvConf is read for what a dns block leaves unset.
	hostResolvConf = "/etc/resolv.conf"
	// maxHostResolvConf bounds the read of the node's resolv.conf.
	maxHostResolvConf = 64 << 10
)

// renderResolvConf is the resolv.conf of d: what d leaves empty (servers,
// searches or options) is the node's (host, the node's resolv.conf).
func renderResolvConf(d *structs.DNSConfig, host *structs.DNSConfig) []byte {
	servers, searches, options := d.Servers, d.Searches, d.Options
	if host != nil {
		if len(servers) == 0 {
			servers = host.Servers
		}
		if len(searches) == 0 {
			searches = host.Searches
		}
		if len(options) == 0 {
			options = host.Options
		}
	}
	var b bytes.Buffer
	b.WriteString("# Written by drover from the group's network dns block.\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(searches, " "))
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.Bytes()
}

// parseResolvConf reads the nameserver, search (and domain) and options
// lines of a resolv.conf; the last search or domain line wins, as in
// resolv.conf(5).
func parseResolvConf(r io.Reader) *structs.DNSConfig {
	d := &structs.DNSConfig{}
	sc := bufio.NewScanner(io.LimitReader(r, maxHostResolvConf))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(d.Servers) < structs.MaxDNSServers {
				d.Servers = append(d.Servers, f[1])
			}
		case "search", "domain":
			d.Searches = slices.Clone(f[1:])
		case "options":
			d.Options = append(d.Options, f[1:]...)
		}
	}
	return d
}

func readHostResolvConf(path string) *structs.DNSConfig {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseResolvConf(f)
}

// writeResolvConf writes the allocation's resolv.conf from d and returns
// its path. Written in place (not renamed over): a task that has it bound
// sees a rewrite.
func (ar *allocRunner) writeResolvConf(d *structs.DNSConfig) (string, error) {
	root, err := ar.dir.open()
	if err != nil {
		return "", fmt.Errorf("write the allocation's resolv.conf: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(resolvConfName, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", fmt.Errorf("write the allocation's resolv.conf: %w", err)
	}
	_, err = f.Write(renderResolvConf(d, readHostResolvConf(hostResolvConf)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the allocation's resolv.conf: %w", err)
	}
	return f.Name(), nil
}

// taskDNS is the group network's dns block as drivers read it, and the
// allocation's resolv.conf written from it (isolated modes only).
func (ar *allocRunner) taskDNS() (*driverpb.DNSConfig, string) {
	n := groupNetwork(ar.group())
	if n == nil || n.DNS == nil {
		return nil, ""
	}
	d := &driverpb.DNSConfig{Servers: slices.Clone(n.DNS.Servers), Searches: slices.Clone(n.DNS.Searches), Options: slices.Clone(n.DNS.Options)}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return d, ar.resolvConf
}
