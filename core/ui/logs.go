package ui

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// LogReader reads a task's log as GET /v1/client/fs/logs/<alloc> with
// plain=true does, authorized by secret (the caller's token) as that
// route is. It writes the log to w from offset, relative to origin
// ("start" or "end"); with follow it keeps writing until ctx ends.
// Errors carry a structs error kind (ErrNotFound, ErrPermissionDenied).
type LogReader interface {
	TaskLogs(ctx context.Context, secret, allocID, task, logType, origin string, offset int64, follow bool, w io.Writer) error
}

// tailBytes is how much of a log the page shows without script: the end
// of it, as `drover alloc logs -tail` would.
const tailBytes = 64 << 10

type logsData struct {
	Alloc     *structs.Allocation
	Tasks     []string
	Task      string
	Type      string
	Text      string
	Truncated bool
	Error     string
	StreamURL string
	// Tail is how far back from the end the page's text reaches; the
	// followed stream starts there again.
	Tail int
}

// logsPage is /ui/allocations/<id>/logs?task=&type=stdout|stderr: the last
// 64 KiB of a task's log, read on the server, and the address logs.js
// follows it from. It needs read-logs in the allocation's namespace.
func (u *UI) logsPage(q *request) (*view, error) {
	a, task, typ, err := u.logTarget(q)
	if err != nil {
		return nil, err
	}
	d := &logsData{Alloc: a, Task: task, Type: typ, Tail: tailBytes}
	for _, t := range a.Job.LookupTaskGroup(a.TaskGroup).Tasks {
		d.Tasks = append(d.Tasks, t.Name)
	}
	d.StreamURL = "/ui/allocations/" + url.PathEscape(a.ID) + "/logs/stream?" + url.Values{"task": {task}, "type": {typ}}.Encode()
	if u.cfg.Logs == nil {
		d.Error = "This agent cannot read task logs."
		return &view{tmpl: "logs", title: "Logs of " + task, data: d, script: true}, nil
	}
	ctx, cancel := context.WithTimeout(q.Context(), 20*time.Second)
	defer cancel()
	var buf bytes.Buffer
	// The reader sends at most tailBytes from the end; the limit guards
	// against one that sends more.
	lw := &limitWriter{w: &buf, n: tailBytes}
	if err := u.cfg.Logs.TaskLogs(ctx, q.secret, a.ID, task, typ, "end", tailBytes, false, lw); err != nil {
		switch errStatus(err) {
		case http.StatusNotFound:
			d.Error = "The task has written no " + typ + " yet, or its node no longer keeps the log."
		case http.StatusForbidden:
			return nil, forbidden("Your token may not read logs in namespace %s (it needs read-logs).", a.Namespace)
		default:
			d.Error = "The log could not be read: " + err.Error()
		}
	}
	b := buf.Bytes()
	d.Truncated = len(b) == tailBytes
	// The cut may fall inside a character: start at the next whole one.
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	d.Text = string(b)
	return &view{tmpl: "logs", title: "Logs of " + task, data: d, script: true}, nil
}

// logTarget reads and checks what a log request names.
func (u *UI) logTarget(q *request) (*structs.Allocation, string, string, error) {
	id := q.PathValue("id")
	a, err := q.st.AllocByID(nil, id)
	if err != nil {
		return nil, "", "", err
	}
	if a == nil {
		return nil, "", "", notFound("No allocation %s.", id)
	}
	if !q.allowNS(a.Namespace, acl.NamespaceCapabilityReadLogs) {
		return nil, "", "", forbidden("Your token may not read logs in namespace %s (it needs read-logs).", a.Namespace)
	}
	qs := q.URL.Query()
	task, typ := qs.Get("task"), qs.Get("type")
	if typ == "" {
		typ = "stdout"
	}
	if typ != "stdout" && typ != "stderr" {
		return nil, "", "", badRequest("The log type must be stdout or stderr, not %q.", typ)
	}
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	if a.Job == nil || tg == nil {
		return nil, "", "", notFound("Allocation %s's group %s is not in its job.", shortID(a.ID), a.TaskGroup)
	}
	if task == "" && len(tg.Tasks) > 0 {
		task = tg.Tasks[0].Name
	}
	if tg.LookupTask(task) == nil {
		return nil, "", "", notFound("Allocation %s has no task %s.", shortID(a.ID), task)
	}
	return a, task, typ, nil
}

// logStream is /ui/allocations/<id>/logs/stream?task=&type=&offset=: the
// log as plain text from offset bytes before its end, followed, for
// logs.js (same origin, so the session cookie authorizes it).
func (u *UI) logStream(w http.ResponseWriter, r *http.Request) {
	q, ok := u.resolve(w, r)
	if !ok {
		return
	}
	a, task, typ, err := u.logTarget(q)
	if err == nil && u.cfg.Logs == nil {
		err = &pageError{status: http.StatusNotImplemented, msg: "This agent cannot read task logs."}
	}
	var offset int64
	if v := q.URL.Query().Get("offset"); err == nil && v != "" {
		if offset, err = strconv.ParseInt(v, 10, 64); err != nil || offset < 0 {
			err = badRequest("offset must be a non-negative number of bytes, not %q.", v)
		}
	}
	if err != nil {
		http.Error(w, err.Error(), errStatus(err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fw := &flushWriter{w: w}
	err = u.cfg.Logs.TaskLogs(q.Context(), q.secret, a.ID, task, typ, "end", offset, true, fw)
	if err != nil && !fw.started && q.Context().Err() == nil {
		http.Error(w, err.Error(), errStatus(err))
	}
}

// flushWriter sends each write at once, for a followed log.
type flushWriter struct {
	w       http.ResponseWriter
	started bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.started = true
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

// limitWriter keeps the first n bytes and discards the rest.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	k := min(int64(len(p)), l.n)
	if _, err := l.w.Write(p[:k]); err != nil {
		return 0, err
	}
	l.n -= k
	return len(p), nil
}
