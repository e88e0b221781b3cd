package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Blocking query limits (§8): the default and the maximum wait are both
// five minutes, and up to wait/16 of jitter spreads the wake-ups of many
// watchers of one object.
const (
	maxQueryTime  = 300 * time.Second
	jitterDivisor = 16
)

// Headers of read responses.
const (
	headerIndex       = "X-Nomad-Index"
	headerKnownLeader = "X-Nomad-KnownLeader"
	headerLastContact = "X-Nomad-LastContact"
	headerNextToken   = "X-Nomad-NextToken"
)

// queryOptions are the parameters every read accepts.
type queryOptions struct {
	Namespace string
	Prefix    string
	MinIndex  uint64
	Wait      time.Duration
}

// badRequest is a refusal of the request itself: a 400 naming the field.
func badRequest(format string, args ...any) error {
	return structs.NewError(structs.ErrInvalid, format, args...)
}

// parseQuery reads the namespace, prefix and blocking parameters.
func parseQuery(r *http.Request) (queryOptions, error) {
	q := r.URL.Query()
	opts := queryOptions{Namespace: q.Get("namespace"), Prefix: q.Get("prefix")}
	if opts.Namespace == "" {
		opts.Namespace = structs.DefaultNamespace
	}
	if v := q.Get("index"); v != "" {
		idx, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return opts, badRequest("Invalid index")
		}
		opts.MinIndex = idx
	}
	opts.Wait = maxQueryTime
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return opts, badRequest("Invalid wait time")
		}
		if d > 0 && d < maxQueryTime {
			opts.Wait = d
		}
	}
	return opts, nil
}

// parseBool reads an optional boolean query parameter.
func parseBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("Failed to parse value of %q (%v) as a bool", name, v)
	}
	return b, nil
}

// notFound is a read's answer for a missing object. It is a value rather
// than an error so that a blocking query keeps waiting for the object to
// appear, as Nomad's does.
type notFound string

// readFunc computes a read's answer and the index that goes into
// X-Nomad-Index; it must register what it reads in ws.
type readFunc func(ws memdb.WatchSet, st reader) (uint64, any, error)

// blockingRead runs fn as a blocking query when ?index is set and writes
// its answer with the read headers.
func (s *HTTPServer) blockingRead(w http.ResponseWriter, r *http.Request, fn func(q queryOptions) readFunc) {
	s.blockingReadIndex(w, r, false, fn)
}

// blockingReadIndex is blockingRead; with exact it answers the read's index
// as it is, 0 included (Nomad's allocation and evaluation lists answer 0
// while their table is empty), instead of at least 1.
func (s *HTTPServer) blockingReadIndex(w http.ResponseWriter, r *http.Request, exact bool, fn func(q queryOptions) readFunc) {
	q, err := parseQuery(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	read := fn(q)

	ctx := r.Context()
	if q.MinIndex > 0 {
		wait := q.Wait
		wait += rand.N(wait/jitterDivisor + 1)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
		defer context.AfterFunc(s.stopping, cancel)()
	}

	// The last answer computed; a timed-out blocking query returns it with
	// its unchanged index.
	var (
		mu     sync.Mutex
		result any
		index  uint64
		have   bool
	)
	_, err = s.query(ctx, q.MinIndex, func(ws memdb.WatchSet, st reader) (uint64, error) {
		idx, out, err := read(ws, st)
		if err != nil {
			return 0, err
		}
		// An index of 0 would make clients spin: answer at least 1,
		// unless the route answers its table's index as Nomad does.
		if !exact {
			idx = max(idx, 1)
		}
		mu.Lock()
		result, index, have = out, idx, true
		mu.Unlock()
		return idx, nil
	})
	mu.Lock()
	defer mu.Unlock()
	// A wait that ran out, or a shutdown, answers with the last result.
	ended := errors.Is(err, context.DeadlineExceeded) || s.stopping.Err() != nil
	if err != nil && !(have && ended) {
		if r.Context().Err() != nil {
			return // the caller went away
		}
		s.writeError(w, err)
		return
	}
	if !have {
		s.writeError(w, fmt.Errorf("query returned no result"))
		return
	}
	s.setReadHeaders(w, index)
	if nf, ok := result.(notFound); ok {
		writeText(w, http.StatusNotFound, string(nf))
		return
	}
	writeJSON(w, r, http.StatusOK, result)
}

// readObject serves the read of one object, found by get. It answers with
// the object's own ModifyIndex (§11), so that a blocking query on one object
// wakes only when that object changes, and answers a missing object with
// notFound (missing is the message) at the table's index, so that a blocking
// query waits for the object to appear. answer returns the object's
// ModifyIndex and the body to send.
func readObject[T any](s *HTTPServer, w http.ResponseWriter, r *http.Request, table, missing string,
	answer func(*T) (uint64, any), get func(ws memdb.WatchSet, st reader, q queryOptions) (*T, error)) {
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			obj, err := get(ws, st, q)
			if err != nil {
				return 0, nil, err
			}
			if obj == nil {
				return st.Index(table), notFound(missing), nil
			}
			index, body := answer(obj)
			return index, body, nil
		}
	})
}

// readList serves the read of a list, found by list and sent as view makes
// it. It answers with the table's index: any write to the table may change
// the list.
func readList[L, V any](s *HTTPServer, w http.ResponseWriter, r *http.Request, table string,
	view func(L) V, list func(ws memdb.WatchSet, st reader, q queryOptions) (L, error)) {
	readListIndex(s, w, r, false, table, view, list)
}

// readListExact is readList answering the table's index as it is: 0 while
// the table has never been written. Nomad's allocation and evaluation lists
// (all, by job, by evaluation) do so, and its API tests assert it.
func readListExact[L, V any](s *HTTPServer, w http.ResponseWriter, r *http.Request, table string,
	view func(L) V, list func(ws memdb.WatchSet, st reader, q queryOptions) (L, error)) {
	readListIndex(s, w, r, true, table, view, list)
}

func readListIndex[L, V any](s *HTTPServer, w http.ResponseWriter, r *http.Request, exact bool, table string,
	view func(L) V, list func(ws memdb.WatchSet, st reader, q queryOptions) (L, error)) {
	s.blockingReadIndex(w, r, exact, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			items, err := list(ws, st, q)
			if err != nil {
				return 0, nil, err
			}
			return st.Index(table), view(items), nil
		}
	})
}

// setReadHeaders sets the headers Nomad's clients read after every query.
// drover reads from the local store, which is always current, so the last
// contact is 0.
func (s *HTTPServer) setReadHeaders(w http.ResponseWriter, index uint64) {
	h := w.Header()
	h.Set(headerIndex, strconv.FormatUint(index, 10))
	h.Set(headerKnownLeader, strconv.FormatBool(s.srv.LeaderAddr() != ""))
	h.Set(headerLastContact, "0")
}

// writeWrite answers a write with its index header.
func writeWrite(w http.ResponseWriter, r *http.Request, index uint64, body any) {
	w.Header().Set(headerIndex, strconv.FormatUint(index, 10))
	writeJSON(w, r, http.StatusOK, body)
}

// writeJSON encodes body; ?pretty indents it as Nomad does.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, pretty := r.URL.Query()["pretty"]
	if l, ok := body.(streamedList); ok && !pretty {
		writeStreamed(w, l)
		return
	}
	enc := json.NewEncoder(w)
	if pretty {
		enc.SetIndent("", "    ")
	}
	_ = enc.Encode(body)
}

// streamedList is a list answer written element by element: encoder.Encode
// builds a whole answer in one buffer before it writes it, so a large
// list (jobs with their meta) would cost each of its concurrent readers
// a buffer of the whole answer.
type streamedList interface {
	Len() int
	Elem(i int) any
}

// writeStreamed writes l as a JSON array, one element at a time.
func writeStreamed(w http.ResponseWriter, l streamedList) {
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := json.NewEncoder(bw)
	_ = bw.WriteByte('[')
	for i := range l.Len() {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if enc.Encode(l.Elem(i)) != nil {
			return // the elements are plain structs: only a gone client fails
		}
	}
	_, _ = bw.WriteString("]\n")
	_ = bw.Flush()
}

// writeText writes a plain-text body, the form of every Nomad error.
func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg))
}

// writeError maps err's kind to a status; the body is the message alone.
func (s *HTTPServer) writeError(w http.ResponseWriter, err error) {
	status := structs.HTTPStatus(err)
	if status >= 500 {
		s.logger.Error("request error", "error", err)
	}
	writeText(w, status, err.Error())
}

// namespaceOf picks the namespace for a write: the object's own, else the
// request's, else the default.
func namespaceOf(own string, r *http.Request) string {
	if own != "" {
		return own
	}
	if ns := r.URL.Query().Get("namespace"); ns != "" && ns != state.AllNamespaces {
		return ns
	}
	return structs.DefaultNamespace
}
