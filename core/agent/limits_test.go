package agent

import (
	"strings"
	"testing"
)

func TestParseHTTPMaxBodyBytes(t *testing.T) {
	base := "data_dir = \"/x\"\nserver { enabled = true }\n"
	c, err := ParseConfig("agent.hcl", []byte(base+"http_max_body_bytes = 1048576\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPMaxBodyBytes != 1<<20 {
		t.Fatalf("HTTPMaxBodyBytes = %d", c.HTTPMaxBodyBytes)
	}
	if _, err := ParseConfig("agent.hcl", []byte(base+"http_max_body_bytes = -1\n")); err == nil || !strings.Contains(err.Error(), "http_max_body_bytes") {
		t.Fatalf("negative limit: %v", err)
	}
}
