package agent

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/drover-org/drover/core/rpc"
)

// tlsConfigs are the TLS settings the agent derives from its `tls` block.
// A nil field means that side speaks plaintext.
type tlsConfigs struct {
	rpcServer, rpcClient *tls.Config
	// httpServer serves the HTTP API over HTTPS; httpClient is how this
	// agent reaches another agent's HTTPS API (a follower forwarding a
	// read to the leader, a client-only agent proxying to a server).
	httpServer, httpClient *tls.Config
}

// loadTLS reads the certificates named by cfg.TLS. One key pair and CA
// serve both RPC and HTTPS, as in Nomad. The HTTPS side asks for client
// certificates only with verify_https_client: browsers and curl without a
// certificate must reach the API otherwise.
//
// Files named in the block are read and checked whatever the block turns
// on, so that a wrong file is a start-up error and not a surprise the day
// rpc or http is switched on. They serve RPC only with rpc = true: without
// it RPC stays on the cluster PKI (usePKI), never plaintext by accident.
func loadTLS(cfg *Config) (tlsConfigs, error) {
	t := cfg.TLS
	if t == nil || !operatorCerts(cfg) {
		// Without certificate files the cluster PKI (tls_auto.go) serves.
		return tlsConfigs{}, nil
	}
	srv, cli, err := rpc.TLSConfig(t.CAFile, t.CertFile, t.KeyFile, t.VerifyServerHostname, rpc.ServerName(cfg.Region))
	if err != nil {
		return tlsConfigs{}, err
	}
	var out tlsConfigs
	if t.RPC {
		out.rpcServer, out.rpcClient = srv, cli
	}
	if t.HTTP {
		hs := srv.Clone()
		hs.NextProtos = []string{"h2", "http/1.1"}
		if !t.VerifyHTTPSClient {
			hs.ClientAuth = tls.NoClientCert
			hs.ClientCAs = nil
		}
		out.httpServer = hs
		hc := cli.Clone()
		hc.NextProtos = nil
		out.httpClient = hc
	}
	return out, nil
}

// rpcAuth names how this agent's RPC is authenticated, for operators
// (agent self, members tags) and the start-up log.
const (
	rpcAuthPKI      = "cluster_pki"
	rpcAuthOperator = "operator_tls"
	rpcAuthNone     = "none"
	rpcAuthDev      = "dev"
)

// rpcAuthMode is how the agent's RPC ends up authenticated.
func rpcAuthMode(cfg *Config, t tlsConfigs) string {
	switch {
	case cfg.DevMode:
		return rpcAuthDev
	case usePKI(cfg):
		return rpcAuthPKI
	case t.rpcServer != nil || t.rpcClient != nil:
		return rpcAuthOperator
	}
	return rpcAuthNone
}

// httpScheme is the scheme of the HTTP API of the cluster's agents: every
// agent of a cluster has the same tls.http setting.
func (a *Agent) httpScheme() string {
	if a.httpsTLS != nil {
		return "https"
	}
	return "http"
}

// proxyTransport is the transport for requests this agent proxies to
// another agent's HTTP API.
func (a *Agent) proxyTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		TLSClientConfig:     a.httpsClient,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 8,
	}
}
