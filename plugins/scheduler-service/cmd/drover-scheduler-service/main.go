// Command drover-scheduler-service is the service scheduler as a
// standalone plugin binary. The drover binary serves the same scheduler
// built in; this one is for installing a build of it separately in
// plugin_dir, where it takes over the service job type from the built-in.
package main

import (
	service "github.com/drover-org/drover/plugins/scheduler-service"
	"github.com/drover-org/drover/sdk/scheduler"
)

func main() {
	scheduler.Serve(service.New())
}
