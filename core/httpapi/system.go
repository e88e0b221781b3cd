package httpapi

import "net/http"

// systemHandlers serves /v1/system/*. Its handlers reach the server through
// the embedded pointer.
type systemHandlers struct{ *HTTPServer }

// systemGC is PUT /v1/system/gc (Nomad's System.GarbageCollect, `drover
// system gc`): every core GC job runs at once with the force threshold. It
// needs a management token. Nomad's client sends an empty object as the
// body, which is ignored; the answer is an empty 200. Errors keep their
// kind: a cluster without a leader or a GC plugin answers 503.
func (s systemHandlers) systemGC(w http.ResponseWriter, r *http.Request) {
	if err := s.system.ForceGC(r.Context()); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// systemReconcileSummaries is PUT /v1/system/reconcile/summaries (Nomad's
// System.ReconcileJobSummaries): every job summary is rebuilt from the
// state. It needs a management token; the answer is an empty 200.
func (s systemHandlers) systemReconcileSummaries(w http.ResponseWriter, r *http.Request) {
	if err := s.system.ReconcileJobSummaries(r.Context()); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}
