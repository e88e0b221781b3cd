// Command drover-gc is drover's default GC plugin as a standalone plugin
// binary, for installing a build of it in plugin_dir under a plugin stanza.
package main

import (
	gc "github.com/drover-org/drover/plugins/gc"
	sdkgc "github.com/drover-org/drover/sdk/gc"
)

func main() {
	sdkgc.Serve(gc.New())
}
