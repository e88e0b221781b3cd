package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	HTTP      *http.Client
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
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
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

// escapeID escapes an ID for a path segment; job IDs hold slashes.
func escapeID(id string) string { return url.PathEscape(id) }
