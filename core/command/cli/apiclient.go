package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultAddress is the agent the CLI talks to when neither -address nor
// DROVER_ADDR / NOMAD_ADDR name one.
const DefaultAddress = "http://127.0.0.1:4646"

// APIError is a non-2xx answer of the agent. Its message is the body the
// agent wrote, which drover (like Nomad) keeps to a plain-text explanation.
type APIError struct {
	StatusCode int
	Body       string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("Unexpected response code: %d (%s)", e.StatusCode, strings.TrimSpace(e.Body))
}

// IsNotFound reports whether err is the agent's 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

// APIClient is a thin client of drover's (Nomad's) v1 HTTP API.
type APIClient struct {
	// Address is the agent's base URL, e.g. http://127.0.0.1:4646.
	Address string
	// Token is sent as X-Nomad-Token when not empty.
	Token string
	// Namespace is added to every request as ?namespace= when not empty.
	Namespace string
	// Headers are added to every request.
	Headers map[string]string
	HTTP    *http.Client
	// TLS configures HTTPS to the agent (ignored when HTTP is set).
	TLS TLSOptions

	tlsOnce   sync.Once
	tlsClient *http.Client
	tlsErr    error
}

// TLSOptions are the CLI's HTTPS settings, after Nomad's -ca-cert,
// -client-cert, -client-key, -tls-server-name and -tls-skip-verify (and
// their NOMAD_* variables).
type TLSOptions struct {
	CACert     string // PEM file of the CA that signed the agent's certificate
	ClientCert string // PEM certificate presented to the agent
	ClientKey  string // its key
	ServerName string // name checked in the agent's certificate; default the address's host
	SkipVerify bool   // do not verify the agent's certificate (insecure)
}

func (o TLSOptions) set() bool {
	return o.CACert != "" || o.ClientCert != "" || o.ClientKey != "" || o.ServerName != "" || o.SkipVerify
}

// httpClient is the client requests go through: HTTP when set, else one
// built from TLS once, else the default client.
func (c *APIClient) httpClient() (*http.Client, error) {
	if c.HTTP != nil {
		return c.HTTP, nil
	}
	if !c.TLS.set() {
		return http.DefaultClient, nil
	}
	c.tlsOnce.Do(func() {
		cfg, err := c.TLS.config()
		if err != nil {
			c.tlsErr = err
			return
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = cfg
		c.tlsClient = &http.Client{Transport: tr}
	})
	return c.tlsClient, c.tlsErr
}

func (o TLSOptions) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName, InsecureSkipVerify: o.SkipVerify}
	if o.CACert != "" {
		pem, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("reading CA certificate (-ca-cert): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s (-ca-cert) holds no PEM certificate", o.CACert)
		}
		cfg.RootCAs = pool
	}
	if (o.ClientCert == "") != (o.ClientKey == "") {
		return nil, errors.New("-client-cert and -client-key must be given together")
	}
	if o.ClientCert != "" {
		pair, err := tls.LoadX509KeyPair(o.ClientCert, o.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("loading client certificate (-client-cert, -client-key): %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// QueryMeta is what a read returns beside its body.
type QueryMeta struct {
	LastIndex uint64
}

func (c *APIClient) url(path string, q url.Values) string {
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	if c.Namespace != "" && v.Get("namespace") == "" {
		v.Set("namespace", c.Namespace)
	}
	u := strings.TrimRight(c.Address, "/") + path
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u
}

func (c *APIClient) do(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("X-Nomad-Token", c.Token)
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
		return nil, &APIError{StatusCode: resp.StatusCode, Body: string(b)}
	}
	return resp, nil
}

// Get reads path into out (when not nil) and returns the response's index.
func (c *APIClient) Get(ctx context.Context, path string, q url.Values, out any) (QueryMeta, error) {
	resp, err := c.do(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return QueryMeta{}, err
	}
	defer resp.Body.Close()
	meta := QueryMeta{}
	meta.LastIndex, _ = strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	if out == nil {
		return meta, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return meta, fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return meta, nil
}

// GetRaw returns the body of a read unparsed, for -json output.
func (c *APIClient) GetRaw(ctx context.Context, path string, q url.Values) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// BlockingGet is Get as a blocking query: it returns once the index passes
// index or wait elapses.
func (c *APIClient) BlockingGet(ctx context.Context, path string, index uint64, wait time.Duration, out any) (QueryMeta, error) {
	q := url.Values{}
	if index > 0 {
		q.Set("index", strconv.FormatUint(index, 10))
		q.Set("wait", wait.String())
	}
	return c.Get(ctx, path, q, out)
}

// Write sends in as JSON with method (PUT, POST, DELETE) and decodes the
// answer into out.
func (c *APIClient) Write(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.do(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return nil
}

// Stream opens a streaming read; the caller closes the body.
func (c *APIClient) Stream(ctx context.Context, path string, q url.Values) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// EscapeID escapes an ID for a path segment; job IDs hold slashes.
func EscapeID(id string) string { return url.PathEscape(id) }

const tlsOptions = `
  -ca-cert=<path>
    The CA certificate that signed the agent's HTTPS certificate.
    Overrides DROVER_CACERT and NOMAD_CACERT.

  -client-cert=<path>, -client-key=<path>
    A client certificate and key, for agents with verify_https_client.
    Override DROVER_CLIENT_CERT/NOMAD_CLIENT_CERT and
    DROVER_CLIENT_KEY/NOMAD_CLIENT_KEY.

  -tls-server-name=<name>
    The name to check in the agent's certificate instead of the address's
    host. Overrides DROVER_TLS_SERVER_NAME and NOMAD_TLS_SERVER_NAME.

  -tls-skip-verify
    Do not verify the agent's certificate (insecure). Overrides
    DROVER_SKIP_VERIFY and NOMAD_SKIP_VERIFY.`

// tlsFlags registers the HTTPS flags of every API command.
func (m *Meta) tlsFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.tls.CACert, "ca-cert", "", "")
	fs.StringVar(&m.tls.ClientCert, "client-cert", "", "")
	fs.StringVar(&m.tls.ClientKey, "client-key", "", "")
	fs.StringVar(&m.tls.ServerName, "tls-server-name", "", "")
	fs.BoolVar(&m.tls.SkipVerify, "tls-skip-verify", false, "")
}

// tlsOptions are the flags, then the environment.
func (m *Meta) tlsOptions() TLSOptions {
	o := m.tls
	fill := func(dst *string, names ...string) {
		if *dst == "" {
			*dst = m.env(names...)
		}
	}
	fill(&o.CACert, "DROVER_CACERT", "NOMAD_CACERT")
	fill(&o.ClientCert, "DROVER_CLIENT_CERT", "NOMAD_CLIENT_CERT")
	fill(&o.ClientKey, "DROVER_CLIENT_KEY", "NOMAD_CLIENT_KEY")
	fill(&o.ServerName, "DROVER_TLS_SERVER_NAME", "NOMAD_TLS_SERVER_NAME")
	if !o.SkipVerify {
		if v, err := strconv.ParseBool(m.env("DROVER_SKIP_VERIFY", "NOMAD_SKIP_VERIFY")); err == nil {
			o.SkipVerify = v
		}
	}
	return o
}
