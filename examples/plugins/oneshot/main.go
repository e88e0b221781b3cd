// Command scheduler-oneshot is a third-party scheduler plugin for drover: it
// serves the job type "oneshot". Put the binary in the agent's plugin_dir
// and name it in the agent config:
//
//	plugin_dir = "/opt/drover/plugins"
//	plugin "scheduler-oneshot" {
//	  config {
//	    max_per_node = 1 # optional; see oneshot.Settings
//	  }
//	}
package main

import (
	"github.com/drover-org/drover/examples/plugins/oneshot/oneshot"
	"github.com/drover-org/drover/sdk/scheduler"
)

// version is what Info reports; a release build sets it with
// -ldflags "-X main.version=1.2.3".
var version = "0.1.0"

func main() {
	scheduler.Serve(oneshot.New(version))
}
