package operator

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestPrintEvents(t *testing.T) {
	tests := []struct {
		name, in, out, err string
	}{
		{"one event per line, heartbeats skipped",
			`{"Index":5,"Events":[{"Topic":"Job","Key":"a"},{"Topic":"Job","Key":"b"}]}` + "\n{}\n" +
				`{"Index":6,"Events":[{"Topic":"Node","Key":"n"}]}` + "\n",
			`{"Topic":"Job","Key":"a"}` + "\n" + `{"Topic":"Job","Key":"b"}` + "\n" + `{"Topic":"Node","Key":"n"}` + "\n",
			"unexpected EOF"},
		{"server error ends the stream", `{"Index":5,"Events":[{"Key":"a"}]}` + "\n" + `{"Error":"client is too slow"}` + "\n",
			`{"Key":"a"}` + "\n", "client is too slow"},
		{"garbage", "not json\n", "", "invalid character"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := printEvents(strings.NewReader(tt.in), &out)
		if out.String() != tt.out {
			t.Errorf("%s: out = %q, want %q", tt.name, out.String(), tt.out)
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestOperatorEventsCommand(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.Handle("GET /v1/event/stream", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"Index":5,"Events":[{"Topic":"Job","Type":"JobRegistered","Key":"web"}]}` + "\n{}\n" +
			`{"Error":"subscription closed by server, client is too slow"}` + "\n"))
	})
	r := f.Run(t, "", "operator", "events", "-topic", "Job:web", "-topic", "Node", "-index", "5", "-namespace", "team")
	clitest.WantCode(t, r, 1)
	if r.Out != `{"Topic":"Job","Type":"JobRegistered","Key":"web"}`+"\n" {
		t.Errorf("out = %q", r.Out)
	}
	clitest.WantContains(t, "stderr", r.ErrOut, "client is too slow")
	q, err := url.ParseQuery(f.Request("GET /v1/event/stream").Query)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q["topic"], ","); got != "Job:web,Node" || q.Get("index") != "5" || q.Get("namespace") != "team" {
		t.Errorf("query = %v", q)
	}

	f.Fail("GET /v1/event/stream", http.StatusForbidden, "Permission denied")
	r = f.Run(t, "", "operator", "events")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Permission denied")

	r = f.Run(t, "", "operator", "events", "extra")
	clitest.WantCode(t, r, 1)
}
