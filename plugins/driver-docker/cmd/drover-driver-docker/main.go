// Command drover-driver-docker is the docker task driver as a standalone
// plugin binary. The drover binary serves the same driver built in (as
// `drover __plugin driver-docker`); this one is for installing it
// separately. Its config is read from DROVER_DOCKER_PLUGIN_CONFIG (JSON).
package main

import docker "github.com/drover-org/drover/plugins/driver-docker"

func main() {
	docker.Serve()
}
