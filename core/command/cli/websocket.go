package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"
)

// Websocket opens a websocket on path (alloc exec), with the client's
// address, token, namespace, headers and TLS settings. A refused upgrade
// is an *APIError with the agent's status and message.
func (c *APIClient) Websocket(ctx context.Context, path string, q url.Values) (*websocket.Conn, error) {
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	d := websocket.Dialer{ReadBufferSize: 4096, WriteBufferSize: 4096, Proxy: http.ProxyFromEnvironment}
	if tr, ok := hc.Transport.(*http.Transport); ok {
		d.TLSClientConfig = tr.TLSClientConfig
		d.Proxy = tr.Proxy
		d.NetDialContext = tr.DialContext
	}
	u := c.url(path, q)
	switch {
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	default:
		return nil, fmt.Errorf("address %q: scheme must be http or https", c.Address)
	}
	h := http.Header{}
	if c.Token != "" {
		h.Set("X-Nomad-Token", c.Token)
	}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	conn, resp, err := d.DialContext(ctx, u, h)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
			return nil, &APIError{StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(b))}
		}
		return nil, err
	}
	return conn, nil
}
