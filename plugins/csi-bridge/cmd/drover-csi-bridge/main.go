// Command drover-csi-bridge is the CSI bridge as a standalone plugin
// binary. The drover binary serves the same bridge built in (as
// `drover __plugin csi-bridge`); this one is for installing it separately.
package main

import bridge "github.com/drover-org/drover/plugins/csi-bridge"

func main() {
	bridge.Serve()
}
