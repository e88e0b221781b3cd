package command

import (
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/drover-org/drover/core/command/cli"
)

// Version is drover's version; release builds set it with
// -ldflags "-X github.com/drover-org/drover/core/command.Version=…".
var Version = "0.1.0-dev"

// VersionCommand is `drover version` (also `drover -version`, `-v`,
// `--version`).
type VersionCommand struct {
	ui *cli.UI
	// name is the name the binary was started under: "nomad" when it
	// stands in for Nomad on PATH.
	name string
}

func (c *VersionCommand) Synopsis() string { return "Print the drover version" }

// Run prints the version as Nomad's `nomad version` does: a first line
// "<Name> v<version>", then "Revision <commit>" when the build knows it.
// Started as `nomad`, the first line says "Nomad", as the tools that run
// `nomad -version` expect, and a last line says what answers.
func (c *VersionCommand) Run(args []string) int {
	asNomad := c.name == "nomad" || c.name == "nomad.exe"
	if asNomad {
		c.ui.Printf("Nomad v%s\n", Version)
	} else {
		c.ui.Printf("drover v%s\n", Version)
	}
	if rev := revision(); rev != "" {
		c.ui.Printf("Revision %s\n", rev)
	}
	if asNomad {
		c.ui.Printf("drover v%s, serving Nomad's agent config, CLI and v1 HTTP API\n", Version)
	}
	return cli.ExitOK
}

func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// programName is the base name the process was started under.
func programName() string {
	if len(os.Args) == 0 {
		return "drover"
	}
	return filepath.Base(os.Args[0])
}
