package command

import (
	"bytes"
	"strings"
	"testing"
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
