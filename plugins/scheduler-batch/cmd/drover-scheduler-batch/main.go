// Command drover-scheduler-batch is the batch scheduler as a standalone
// plugin binary. The drover binary serves the same scheduler built in; this
// one is for installing a build of it separately in plugin_dir, where it
// takes over the batch job type from the built-in.
package main

import (
	batch "github.com/drover-org/drover/plugins/scheduler-batch"
	"github.com/drover-org/drover/sdk/scheduler"
)

func main() {
	scheduler.Serve(batch.New())
}
