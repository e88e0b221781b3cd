package events

import (
	"encoding/json"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// A node event encodes the node as the node routes do: its SecretID
// blank, Drain true exactly while DrainStrategy is set (Nomad's
// TestNodes_ToggleDrain checks it on every event), and the legacy
// Resources and Reserved blocks.
func TestNodeEventPayload(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain *structs.DrainStrategy
		want  bool
	}{
		{"draining", &structs.DrainStrategy{}, true},
		{"not draining", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &structs.Node{ID: "n1", SecretID: "s3cret", Status: structs.NodeStatusReady, DrainStrategy: tc.drain,
				NodeResources: &structs.NodeResources{}}
			evs := FromChanges(structs.NodeRegisterRequestType, memdb.Changes{{Table: tableNodes, After: n}})
			if len(evs) != 1 || evs[0].Topic != TopicNode || evs[0].Key != "n1" {
				t.Fatalf("events %+v; want one node event", evs)
			}
			raw, err := evs[0].JSON()
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Payload struct {
					Node map[string]any
				}
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			node := got.Payload.Node
			if node["ID"] != "n1" || node["Drain"] != tc.want {
				t.Errorf("encoded node: ID %v Drain %v; want n1, %v", node["ID"], node["Drain"], tc.want)
			}
			if (node["DrainStrategy"] != nil) != tc.want {
				t.Errorf("encoded DrainStrategy %v; want set: %v", node["DrainStrategy"], tc.want)
			}
			if s, _ := node["SecretID"].(string); s != "" {
				t.Errorf("the node's secret travels in its event: %q", s)
			}
			if _, ok := node["Resources"]; !ok {
				t.Errorf("encoded node has no legacy Resources: %v", node)
			}
			if n.SecretID != "s3cret" {
				t.Error("encoding changed the stored node")
			}
		})
	}
}
