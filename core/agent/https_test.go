package agent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"

	"github.com/drover-org/drover/internal/testtier"
)

// httpsAgent starts a dev agent whose tls block turns HTTPS on.
func httpsAgent(t *testing.T, verifyClient bool) (a *Agent, caPEM []byte, cliCert, cliKey string) {
	t.Helper()
	testtier.Agent(t)
	dir := t.TempDir()
	ca := newTestCA(t, "drover-ca")
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey := ca.issue(t, dir, "server", "server.global.drover", "localhost")
	cliCert, cliKey = ca.issue(t, dir, "cli", "cli.global.drover")
	cfg := DevConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Ports.RPC = freePort(t)
	cfg.TLS = &TLSConfig{HTTP: true, CAFile: caPath, CertFile: srvCert, KeyFile: srvKey, VerifyHTTPSClient: verifyClient}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	a, err = New(cfg, Options{
		Logger:  hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
		SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		a.Shutdown()
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	})
	return a, ca.pem, cliCert, cliKey
}

// get sends one GET with its own transport, closed afterwards.
func get(url string, tlsCfg *tls.Config) (int, string, error) {
	tr := &http.Transport{TLSClientConfig: tlsCfg}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: testTimeout}).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// tls { http = true } serves the HTTP API over HTTPS with the agent's
// certificate; plain HTTP is refused.
func TestAgentServesHTTPS(t *testing.T) {
	a, caPEM, _, _ := httpsAgent(t, false)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)

	status, body, err := get("https://"+a.HTTPAddr()+"/v1/agent/self", &tls.Config{RootCAs: pool})
	if err != nil || status != http.StatusOK || !strings.Contains(body, `"DevMode":true`) {
		t.Fatalf("HTTPS with the CA: %d %v %s", status, err, body)
	}
	status, body, err = get("http://"+a.HTTPAddr()+"/v1/agent/self", nil)
	if err == nil && status == http.StatusOK {
		t.Fatalf("plain HTTP was served: %d %s", status, body)
	}
	if err == nil && !strings.Contains(body, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP answer: %d %q", status, body)
	}
	_, _, err = get("https://"+a.HTTPAddr()+"/v1/agent/self", &tls.Config{})
	var unknownCA x509.UnknownAuthorityError
	if !errors.As(err, &unknownCA) {
		t.Errorf("HTTPS without the CA: want an unknown authority error, got %v", err)
	}
}

// With verify_https_client the HTTPS API requires a client certificate of
// the CA, as Nomad's does.
func TestAgentHTTPSVerifiesClients(t *testing.T) {
	a, caPEM, cliCert, cliKey := httpsAgent(t, true)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	url := "https://" + a.HTTPAddr() + "/v1/agent/self"
	if status, body, err := get(url, &tls.Config{RootCAs: pool}); err == nil {
		t.Fatalf("a request without a client certificate was answered: %d %s", status, body)
	}
	pair, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	if status, body, err := get(url, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}); err != nil || status != http.StatusOK {
		t.Fatalf("with a client certificate: %d %v %s", status, err, body)
	}
}

// A client-only agent proxies the API to a server over HTTPS when the
// agents serve HTTPS, presenting its agent certificate.
func TestClientOnlyAgentProxiesOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "drover-ca")
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey := ca.issue(t, dir, "server", "server.global.drover")
	cliCert, cliKey := ca.issue(t, dir, "client", "client.global.drover")
	rpcPort := freePort(t)
	start := func(cfg *Config) *Agent { return startTestAgent(t, cfg, hclog.Warn) }
	tlsBlock := func(cert, key string) *TLSConfig {
		return &TLSConfig{RPC: true, HTTP: true, CAFile: caPath, CertFile: cert, KeyFile: key, VerifyHTTPSClient: true}
	}
	start(&Config{
		NodeName: "s1", Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, "s1"), BindAddr: "127.0.0.1",
		LogLevel: "WARN", Ports: &Ports{RPC: rpcPort},
		Server: &ServerConfig{Enabled: true, BootstrapExpect: 1},
		TLS:    tlsBlock(srvCert, srvKey),
	})
	cli := start(&Config{
		NodeName: "c1", Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, "c1"), BindAddr: "127.0.0.1",
		LogLevel: "WARN", Ports: &Ports{RPC: freePort(t)},
		Client: &ClientConfig{Enabled: true, Servers: []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))}},
		TLS:    tlsBlock(cliCert, cliKey),
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	pair, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}
	waitFor(t, "the client's node, read through the client agent's proxy", func() (bool, string) {
		status, body, err := get("https://"+cli.HTTPAddr()+"/v1/nodes", tlsCfg)
		if err != nil {
			return false, err.Error()
		}
		return status == http.StatusOK && strings.Contains(body, `"Name":"c1"`), fmt.Sprintf("%d %s", status, body)
	})
	// The client-only agent answers /v1/agent/health itself: a client
	// part, no server part.
	waitFor(t, "the client agent's own health", func() (bool, string) {
		status, body, err := get("https://"+cli.HTTPAddr()+"/v1/agent/health", tlsCfg)
		if err != nil {
			return false, err.Error()
		}
		return status == http.StatusOK && strings.Contains(body, `"client":{"ok":true`) && !strings.Contains(body, `"server"`), fmt.Sprintf("%d %s", status, body)
	})
	// A client-only agent evaluates nothing: its scheduler and gc plugins
	// are listed, never started.
	for _, p := range cli.PluginsStatus() {
		if (p.Kind == "scheduler" || p.Kind == "gc") && (p.PID != 0 || p.Health != structs.AgentPluginIdle) {
			t.Errorf("client-only agent runs plugin %+v, want it idle", p)
		}
	}
}
