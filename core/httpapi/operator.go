package httpapi

import (
	"net/http"
	"strconv"

	"github.com/drover-org/drover/core/structs"
)

// operatorHandlers serves /v1/operator/*: the Raft configuration, the
// scheduler configuration and join tokens. Its handlers reach the server
// through the embedded pointer.
type operatorHandlers struct{ *HTTPServer }

// schedulerConfigResponse is the body of GET /v1/operator/scheduler/configuration.
type schedulerConfigResponse struct {
	SchedulerConfig *structs.SchedulerConfiguration
	Index           uint64
	KnownLeader     bool
	LastContact     int64
}

func (s operatorHandlers) schedulerConfigGet(w http.ResponseWriter, r *http.Request) {
	index, cfg, err := s.srv.State().SchedulerConfig()
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, strconv.FormatUint(index, 10))
	writeJSON(w, r, http.StatusOK, &schedulerConfigResponse{SchedulerConfig: cfg, Index: index, KnownLeader: s.srv.LeaderAddr() != ""})
}

func (s operatorHandlers) schedulerConfigSet(w http.ResponseWriter, r *http.Request) {
	var cfg structs.SchedulerConfiguration
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
	updated, idx, err := s.operator.SetSchedulerConfig(r.Context(), &cfg, cas, index)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, map[string]any{"Updated": updated, "Index": idx})
}
