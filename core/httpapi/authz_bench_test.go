package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkBlockingQueryACL is the cost of the ACL check on a read-heavy
// load: GET /v1/jobs?namespace=*&index=1 (a blocking query whose index is
// already passed, so it answers at once) through the whole handler, with
// ACLs off and with ACLs on and a client token whose compiled ACL the
// resolver has cached. It reports requests per second.
//
//	go test -run '^$' -bench BlockingQueryACL -benchtime 3s ./core/httpapi/
func BenchmarkBlockingQueryACL(b *testing.B) {
	for _, tc := range []struct {
		name string
		on   bool
	}{{"acl=off", false}, {"acl=on", true}} {
		b.Run(tc.name, func(b *testing.B) {
			w := newWorld(b, tc.on)
			h := w.h.Handler()
			secret := w.secrets[callerReadOnly]
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodGet, "/v1/jobs?namespace=*&index=1", nil)
					req.Header.Set("X-Nomad-Token", secret)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Errorf("status %d: %s", rec.Code, rec.Body)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}
