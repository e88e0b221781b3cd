package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/drover-org/drover/core/httpapi/jsoninput"
	"github.com/drover-org/drover/core/structs"
)

// limitBody caps every request body at max bytes. What a write accepts ends
// up in the Raft log, so the cap is applied before anything is read.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A snapshot restore is bounded by the server (operator_snapshot.go).
		if r.Body != nil && r.Body != http.NoBody && (r.Method != http.MethodPut || r.URL.Path != snapshotPath) {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}

// decodeBody reads a JSON request body. Unknown fields are accepted and
// ignored: Nomad's client sends many fields drover does not implement.
func decodeBody(r *http.Request, out any) error {
	return decode(r, out, false)
}

// decodeOptionalBody is decodeBody for requests whose body may be empty.
func decodeOptionalBody(r *http.Request, out any) error {
	return decode(r, out, true)
}

func decode(r *http.Request, out any, optional bool) error {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return structs.NewError(structs.ErrTooLarge,
					"Request body too large: exceeds limit http_max_body_bytes (%d bytes)", tooBig.Limit)
			}
			return badRequest("Failed to read request body: %v", err)
		}
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := jsoninput.Decode(body, out); err != nil {
		return badRequest("Failed to decode request body: %v", err)
	}
	return nil
}
