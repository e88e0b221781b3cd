package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/drover-org/drover/core/structs"
)

// AutopilotAPI is the autopilot endpoint; the Operator area implements it
// when the server has autopilot.
type AutopilotAPI interface {
	AutopilotConfig() (*structs.AutopilotConfig, uint64, error)
	SetAutopilotConfig(ctx context.Context, cfg *structs.AutopilotConfig, cas bool, index uint64) (bool, uint64, error)
	AutopilotHealth(ctx context.Context) (*structs.OperatorHealthReply, error)
}

func (s operatorHandlers) autopilot(w http.ResponseWriter) (AutopilotAPI, bool) {
	ap, ok := s.operator.(AutopilotAPI)
	if !ok {
		writeText(w, http.StatusNotImplemented, "autopilot is not supported by this server")
		return nil, false
	}
	return ap, true
}

// autopilotConfigGet is GET /v1/operator/autopilot/configuration: the
// configuration, durations as strings, as Nomad's.
func (s operatorHandlers) autopilotConfigGet(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.autopilot(w)
	if !ok {
		return
	}
	cfg, idx, err := ap.AutopilotConfig()
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.setReadHeaders(w, max(idx, 1))
	writeJSON(w, r, http.StatusOK, cfg)
}

// autopilotConfigSet is PUT /v1/operator/autopilot/configuration[?cas=N]:
// the body is true when the configuration was written, false when the
// check-and-set index did not match.
func (s operatorHandlers) autopilotConfigSet(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.autopilot(w)
	if !ok {
		return
	}
	var cfg structs.AutopilotConfig
	if err := decodeBody(r, &cfg); err != nil {
		s.writeError(w, err)
		return
	}
	var (
		cas   bool
		index uint64
	)
	if v := r.URL.Query().Get("cas"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.writeError(w, structs.NewError(structs.ErrInvalid, "cas: %q is not a valid index", v))
			return
		}
		cas, index = true, n
	}
	updated, idx, err := ap.SetAutopilotConfig(r.Context(), &cfg, cas, index)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, updated)
}

// autopilotHealth is GET /v1/operator/autopilot/health: 200 when every
// server is healthy, 429 (with the same body) when one is not, as Nomad.
func (s operatorHandlers) autopilotHealth(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.autopilot(w)
	if !ok {
		return
	}
	h, err := ap.AutopilotHealth(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	status := http.StatusOK
	if !h.Healthy {
		status = http.StatusTooManyRequests
	}
	writeJSON(w, r, status, h)
}
