package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// WriteBody sends body as it is (not JSON: a snapshot file) with method and
// decodes the answer into out (when not nil).
func (c *APIClient) WriteBody(ctx context.Context, method, path string, body io.Reader, out any) error {
	resp, err := c.do(ctx, method, path, nil, body)
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
