// Command drover-driver-exec is the exec task driver as a standalone
// plugin binary. The drover binary serves the same driver built in (as
// `drover __plugin driver-exec`); this one is for installing it
// separately.
package main

import execdriver "github.com/drover-org/drover/plugins/driver-exec"

func main() {
	execdriver.Serve()
}
