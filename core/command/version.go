package command

import (
	"runtime/debug"

	"github.com/drover-org/drover/core/command/cli"
)

// Version is drover's version; release builds set it with
// -ldflags "-X github.com/drover-org/drover/core/command.Version=…".
var Version = "0.1.0-dev"

// VersionCommand is `drover version`.
type VersionCommand struct {
	ui *cli.UI
}

func (c *VersionCommand) Synopsis() string { return "Print the drover version" }

func (c *VersionCommand) Run(args []string) int {
	c.ui.Printf("drover v%s\n", Version)
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				c.ui.Printf("Revision %s\n", s.Value)
			}
		}
	}
	return cli.ExitOK
}
