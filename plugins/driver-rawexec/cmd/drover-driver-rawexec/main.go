// Command drover-driver-rawexec is the raw_exec task driver as a standalone
// plugin binary. The drover binary serves the same driver built in
// (as `drover __plugin driver-rawexec`); this one is for installing it separately.
package main

import rawexec "github.com/drover-org/drover/plugins/driver-rawexec"

func main() {
	rawexec.Serve()
}
