// Command drover-driver-mock is Nomad's test driver, mock_driver, as a
// standalone plugin binary. The drover binary serves the same driver built
// in (as `drover __plugin driver-mock`); this one is for installing it
// separately.
package main

import mock "github.com/drover-org/drover/plugins/driver-mock"

func main() {
	mock.Serve()
}
