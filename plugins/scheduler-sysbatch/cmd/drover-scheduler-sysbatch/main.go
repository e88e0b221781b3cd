// Command drover-scheduler-sysbatch is the sysbatch scheduler as a
// standalone plugin binary. The drover binary serves the same scheduler
// built in; this one is for installing a build of it separately: dropped in
// plugin_dir under a plugin stanza, it takes over the sysbatch job type from
// the built-in (a plugin later in config order wins a type).
package main

import (
	sysbatch "github.com/drover-org/drover/plugins/scheduler-sysbatch"
	"github.com/drover-org/drover/sdk/scheduler"
)

func main() {
	scheduler.Serve(sysbatch.New())
}
