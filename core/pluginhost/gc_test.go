package pluginhost

import (
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/proto/gcpb"
)

func TestCheckGCInfo(t *testing.T) {
	node := gcpb.Collection_COLLECTION_NODE
	for _, tc := range []struct {
		name string
		info *gcpb.InfoResponse
		want string // "" accepts
	}{
		{"ok", &gcpb.InfoResponse{Name: "x", Collections: []gcpb.Collection{node}}, ""},
		{"nil", nil, "name must not be empty"},
		{"no name", &gcpb.InfoResponse{Collections: []gcpb.Collection{node}}, "name must not be empty"},
		{"no collections", &gcpb.InfoResponse{Name: "x"}, "collections must list at least one"},
		{"unspecified", &gcpb.InfoResponse{Name: "x", Collections: []gcpb.Collection{node, 0}}, "collections[1]: 0 is not a known collection"},
		{"unknown", &gcpb.InfoResponse{Name: "x", Collections: []gcpb.Collection{99}}, "collections[0]: 99 is not a known collection"},
		{"twice", &gcpb.InfoResponse{Name: "x", Collections: []gcpb.Collection{node, node}}, "collections[1]: COLLECTION_NODE is listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkGCInfo(tc.info)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("checkGCInfo = %v, want %q", err, tc.want)
			}
		})
	}
}
