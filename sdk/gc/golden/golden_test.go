package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		wantErr    string
		check      func(t *testing.T, r *gcpb.DecideRequest)
	}{
		{name: "defaults and relative times", body: `{"doc":"d","request":{"collection":"COLLECTION_NODE","nodes":[{"id":"n","status_updated_at_unix_nano":"now-25h"}]}}`,
			check: func(t *testing.T, r *gcpb.DecideRequest) {
				if r.GetNowUnixNano() != Now.UnixNano() {
					t.Errorf("now = %d, want the default", r.GetNowUnixNano())
				}
				if got := r.GetNodes()[0].GetStatusUpdatedAtUnixNano(); got != Now.Add(-25*time.Hour).UnixNano() {
					t.Errorf("now-25h = %d", got)
				}
				if r.GetThresholds().GetNodeNs() != gc.DefaultThresholds().GetNodeNs() {
					t.Errorf("thresholds = %v, want the defaults", r.GetThresholds())
				}
			}},
		{name: "own now", body: `{"doc":"d","request":{"collection":"COLLECTION_ONE_TIME_TOKEN","now_unix_nano":1000,"one_time_tokens":[{"accessor_id":"t","expires_at_unix_nano":"now+90ns"}]}}`,
			check: func(t *testing.T, r *gcpb.DecideRequest) {
				if got := r.GetOneTimeTokens()[0].GetExpiresAtUnixNano(); got != 1090 {
					t.Errorf("now+90ns = %d, want 1090", got)
				}
			}},
		{name: "no doc", body: `{"request":{}}`, wantErr: "missing doc"},
		{name: "unknown field", body: `{"doc":"d","requets":{}}`, wantErr: "unknown field"},
		{name: "bad time", body: `{"doc":"d","request":{"nodes":[{"id":"n","status_updated_at_unix_nano":"yesterday"}]}}`, wantErr: "now±duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Load(write(t, dir, strings.ReplaceAll(tc.name, " ", "_")+".json", tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load: err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, req)
		})
	}
}
