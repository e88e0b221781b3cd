package httpapi

import (
	"net/http/httptest"
	"testing"
)

func TestRequestToken(t *testing.T) {
	tests := []struct {
		name, header, value, want string
	}{
		{"none", "", "", ""},
		{"nomad header", "X-Nomad-Token", " abc ", "abc"},
		{"bearer", "Authorization", "Bearer xyz", "xyz"},
		{"bearer lower case", "Authorization", "bearer xyz", "xyz"},
		{"other scheme", "Authorization", "Basic xyz", ""},
		{"bare bearer", "Authorization", "Bearer ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/jobs", nil)
			if tt.header != "" {
				r.Header.Set(tt.header, tt.value)
			}
			if got := requestToken(r); got != tt.want {
				t.Fatalf("requestToken = %q, want %q", got, tt.want)
			}
		})
	}
}
