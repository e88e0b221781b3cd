package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// testPKI writes a CA and two leaf certificates signed by it (an agent's,
// valid for 127.0.0.1, and a CLI user's) into dir.
type testPKI struct {
	ca, agentCert, agentKey, cliCert, cliKey string
	pool                                     *x509.CertPool
}

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := testPKI{ca: filepath.Join(dir, "ca.pem"), pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	issue := func(name string, serial int64) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			DNSNames: []string{"localhost", "server.global.drover"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		cert, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, keyPath, "EC PRIVATE KEY", kb)
		return cert, keyPath
	}
	p.agentCert, p.agentKey = issue("agent", 2)
	p.cliCert, p.cliKey = issue("cli", 3)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runCLI runs `drover args...` with env added to the environment.
func runCLI(t *testing.T, env []string, args ...string) harness.CLIResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), harness.CLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := harness.CLIResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("drover %s: no exit within %s\n%s", strings.Join(args, " "), harness.CLITimeout, res)
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("drover %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// An agent with tls { http = true, verify_https_client = true } (a -dev
// agent with the tls block merged from -config) serves HTTPS only, and the
// CLI reaches it with Nomad's NOMAD_CACERT / NOMAD_CLIENT_CERT /
// NOMAD_CLIENT_KEY or the -ca-cert / -client-cert / -client-key flags.
func TestHTTPSAgentAndCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	cfg := harness.WriteFile(t, "tls.hcl", fmt.Sprintf(`
tls {
  http                = true
  ca_file             = %q
  cert_file           = %q
  key_file            = %q
  verify_https_client = true
}
`, pki.ca, pki.agentCert, pki.agentKey))
	ports := harness.FreePorts(t, 2)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	proc, err := harness.Start(droverBin, []string{"agent", "-dev", "-config", cfg,
		"-http-port", strconv.Itoa(ports[0]), "-rpc-port", strconv.Itoa(ports[1]),
		"-data-dir", filepath.Join(dir, "data")}, filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := proc.Stop(os.Interrupt, agentExitTimeout); err != nil {
			t.Errorf("stopping the agent: %v", err)
		}
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", proc.Log())
		}
	})

	pair, err := tls.LoadX509KeyPair(pki.cliCert, pki.cliKey)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pair}}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	harness.WaitFor(t, agentReadyTimeout, "a ready node over HTTPS", func() (bool, string) {
		if !proc.Running() {
			t.Fatalf("agent exited: %s", proc.Log())
		}
		resp, err := hc.Get("https://" + addr + "/v1/nodes")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"Status":"ready"`), string(b)
	})

	// Plain HTTP on the same port is refused.
	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: plain, Timeout: 10 * time.Second}).Get("http://" + addr + "/v1/nodes"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || !strings.Contains(string(b), "HTTPS server") {
			t.Errorf("plain HTTP answered %d %q", resp.StatusCode, b)
		}
	}

	https := "NOMAD_ADDR=https://" + addr
	// Nomad's environment variables.
	res := runCLI(t, []string{https, "NOMAD_CACERT=" + pki.ca, "NOMAD_CLIENT_CERT=" + pki.cliCert, "NOMAD_CLIENT_KEY=" + pki.cliKey},
		"node", "status")
	if res.Code != 0 || !strings.Contains(res.Stdout, "ready") {
		t.Errorf("node status with NOMAD_CACERT/NOMAD_CLIENT_*: %s", res)
	}
	// The flags.
	res = runCLI(t, []string{https}, "node", "status", "-ca-cert", pki.ca, "-client-cert", pki.cliCert, "-client-key", pki.cliKey)
	if res.Code != 0 || !strings.Contains(res.Stdout, "ready") {
		t.Errorf("node status with -ca-cert/-client-cert/-client-key: %s", res)
	}
	// Without the CA the agent's certificate is not trusted.
	res = runCLI(t, []string{https, "NOMAD_CLIENT_CERT=" + pki.cliCert, "NOMAD_CLIENT_KEY=" + pki.cliKey}, "node", "status")
	if res.Code != 1 || !strings.Contains(res.Stderr, "certificate") {
		t.Errorf("node status without the CA: %s", res)
	}
	// Without a client certificate the agent refuses the connection.
	res = runCLI(t, []string{https, "NOMAD_CACERT=" + pki.ca}, "node", "status")
	if res.Code != 1 {
		t.Errorf("node status without a client certificate: %s", res)
	}
	// A bad CA file is named.
	res = runCLI(t, []string{https, "NOMAD_CACERT=" + pki.agentKey}, "node", "status")
	if res.Code != 1 || !strings.Contains(res.Stderr, pki.agentKey) {
		t.Errorf("node status with a key as CA: %s", res)
	}
}
