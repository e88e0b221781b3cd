package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/structs"
)

// eventHandlers serves /v1/event/stream. Its handlers reach the server
// through the embedded pointer.
type eventHandlers struct{ *HTTPServer }

// Event stream defaults: Nomad's heartbeat interval, and how long one
// write to a subscriber may take before it is cut off (a client that stops
// reading must not pin its handler forever).
const (
	defaultEventHeartbeat = 10 * time.Second
	eventWriteTimeout     = 30 * time.Second
)

// eventTopicAllowed is the capability a topic needs in namespace ns (as
// Nomad's table: job topics read-job, Node node:read, the rest management;
// drover adds csi-read-volume for CSIVolume, plugin:read for CSIPlugin
// and the namespace's own visibility for Namespace).
func eventTopicAllowed(a *acl.ACL, topic, ns string) bool {
	if a == nil || a.IsManagement() {
		return true
	}
	switch topic {
	case events.TopicJob, events.TopicAllocation, events.TopicEvaluation, events.TopicDeployment, events.TopicService:
		return ns == "*" || a.AllowNamespaceOperation(ns, acl.NamespaceCapabilityReadJob)
	case events.TopicCSIVolume:
		return ns == "*" || a.AllowNamespaceOperation(ns, acl.NamespaceCapabilityCSIReadVolume)
	case events.TopicNode:
		return a.AllowNodeRead()
	case events.TopicCSIPlugin:
		return a.AllowPluginRead()
	case events.TopicNamespace:
		return ns == "*" || a.AllowNamespace(ns)
	}
	return false // *, ACLToken, ACLPolicy: management only
}

// eventAllowed decides one event for the caller's ACL, as cur holds it
// now (the stream re-resolves the token as it goes).
func eventAllowed(cur *atomic.Pointer[acl.ACL]) func(e *events.Event) bool {
	if a := cur.Load(); a == nil {
		return nil
	}
	return func(e *events.Event) bool {
		a := cur.Load()
		switch e.Topic {
		case events.TopicNamespace:
			return a.AllowNamespace(e.Key)
		case events.TopicNode, events.TopicCSIPlugin:
			return eventTopicAllowed(a, e.Topic, "")
		}
		return eventTopicAllowed(a, e.Topic, e.Namespace)
	}
}

// eventStream serves GET /v1/event/stream: newline-delimited JSON, one
// {"Index","Events"} object per Raft entry with matching events, "{}"
// after every idle heartbeat interval. It is served from this server's own
// buffer, leader or not. A subscriber that falls a whole buffer behind is
// sent {"Error": "..."} and the stream ends.
func (s eventHandlers) eventStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// Nomad takes Topic or Topic:Key, one colon at most: a key holding a
	// colon ("Evaluation:::*") is refused with its words.
	for _, p := range q["topic"] {
		if strings.Count(p, ":") > 1 {
			s.writeError(w, badRequest("Invalid topic query parameter: Invalid key value pair for topic: %s", p))
			return
		}
	}
	topics, err := events.ParseTopics(q["topic"])
	if err != nil {
		s.writeError(w, badRequest("Invalid topic query parameter: %v", err))
		return
	}
	ns := q.Get("namespace")
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	a := requestACL(r)
	var cur atomic.Pointer[acl.ACL]
	cur.Store(a)
	for topic := range topics {
		if !eventTopicAllowed(a, topic, ns) {
			s.writeError(w, errPermissionDenied)
			return
		}
	}
	var index uint64
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.writeError(w, badRequest("Invalid index query parameter %q: must be a non-negative integer", v))
			return
		}
		index = n
	}
	if s.events == nil {
		http.Error(w, "event stream not served by this agent (no server)", http.StatusNotImplemented)
		return
	}
	sub, err := s.events.Subscribe(index, &events.Filter{Topics: topics, Namespace: ns, Allow: eventAllowed(&cur)})
	if err != nil {
		if errors.Is(err, events.ErrTooManySubscribers) {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	if sub.Truncated {
		// As Nomad: the stream starts at the oldest index still kept.
		// The header says so to clients that look.
		w.Header().Set("X-Drover-Event-Stream-Truncated", strconv.FormatUint(sub.StartIndex, 10))
		s.logger.Debug("event stream index no longer buffered; starting at the oldest kept", "asked", index, "start", sub.StartIndex)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.stopping, cancel)
	defer stop()

	hb := s.eventHeartbeat
	if hb <= 0 {
		hb = defaultEventHeartbeat
	}
	view := jobView(r)
	var line bytes.Buffer
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// The token is resolved again every heartbeat interval: a deleted or
	// expired token ends the stream, and a changed policy applies from
	// then on (as Nomad closes subscriptions of changed tokens).
	lastCheck := time.Now()
	recheck := func() bool {
		if a == nil || time.Since(lastCheck) < hb {
			return true
		}
		lastCheck = time.Now()
		_, fresh, err := s.resolver.ResolveToken(requestToken(r))
		if err != nil || fresh == nil {
			msg, _ := json.Marshal(map[string]string{"Error": "ACL token no longer valid: stream closed"})
			write(append(msg, '\n'))
			return false
		}
		cur.Store(fresh)
		return true
	}
	for {
		if !recheck() {
			return
		}
		wctx, wcancel := context.WithTimeout(ctx, hb)
		batch, err := sub.Next(wctx)
		wcancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return // the caller went away, or the agent is stopping
		case errors.Is(err, context.DeadlineExceeded):
			if !write([]byte("{}\n")) {
				return
			}
			continue
		default:
			msg, _ := json.Marshal(map[string]string{"Error": err.Error()})
			write(append(msg, '\n'))
			return
		}
		line.Reset()
		if err := encodeBatch(&line, batch, view); err != nil {
			s.logger.Error("cannot encode event", "index", batch.Index, "error", err)
			return
		}
		if !write(line.Bytes()) {
			return
		}
	}
}

// encodeBatch writes one batch as a line. Each event's JSON is encoded
// once and shared by every subscriber, except a Job whose view for this
// caller differs (Env redacted, dispatch payload decoded).
func encodeBatch(buf *bytes.Buffer, b *events.Batch, view func(*structs.Job) *structs.Job) error {
	buf.WriteString(`{"Index":`)
	buf.WriteString(strconv.FormatUint(b.Index, 10))
	buf.WriteString(`,"Events":[`)
	for i, e := range b.Events {
		if i > 0 {
			buf.WriteByte(',')
		}
		var raw []byte
		var err error
		if j, ok := e.Payload["Job"].(*structs.Job); ok && view(j) != j {
			c := *e
			c.Payload = map[string]any{"Job": view(j)}
			raw, err = json.Marshal(&c)
		} else {
			raw, err = e.JSON()
		}
		if err != nil {
			return err
		}
		buf.Write(raw)
	}
	buf.WriteString("]}\n")
	return nil
}
