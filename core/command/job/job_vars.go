package job

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/jobspec"
	"github.com/drover-org/drover/core/structs"
)

// jobFileFlags are the flags of the commands that parse a job file: the
// values of its input variables.
type jobFileFlags struct {
	vars     cli.StringList
	varFiles cli.StringList
}

const jobFileHelp = `
  -var 'key=value'
    Sets a variable of the job file. Repeatable; the last one for a name
    wins, over -var-file values, NOMAD_VAR_<key> environment variables
    and the variable's default.

  -var-file=<path>
    Reads variable values from a file: HCL assignments (key = "value"),
    or JSON when the name ends in .json. Repeatable; later files win.`

func (f *jobFileFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.vars, "var", "")
	fs.Var(&f.varFiles, "var-file", "")
}

// options adds the variables to opts: the -var arguments, the var files'
// contents (read up to one byte past jobspec's limit, which refuses them
// with the file's name) and the environment.
func (f *jobFileFlags) options(ui *cli.UI, opts jobspec.Options) (jobspec.Options, error) {
	opts.Vars = append([]string(nil), f.vars...)
	for _, path := range f.varFiles {
		src, err := readLimited(path, hclguard.MaxFileBytes+1)
		if err != nil {
			return opts, fmt.Errorf("reading var file: %w", err)
		}
		opts.VarFiles = append(opts.VarFiles, jobspec.VarFile{Name: path, Src: src})
	}
	if ui.Environ != nil {
		for _, e := range ui.Environ() {
			if strings.HasPrefix(e, jobspec.EnvVarPrefix) {
				opts.Env = append(opts.Env, e)
			}
		}
	}
	return opts, nil
}

func readLimited(path string, n int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, n))
}

// jobSource reads a job file, or standard input for "-", up to one byte
// past jobspec's limit; it returns the name positions are given in.
func jobSource(ui *cli.UI, path string) (string, []byte, error) {
	if path == "-" {
		src, err := io.ReadAll(io.LimitReader(ui.In, hclguard.MaxFileBytes+1))
		if err != nil {
			return "", nil, fmt.Errorf("reading job from stdin: %w", err)
		}
		return "<stdin>", src, nil
	}
	src, err := readLimited(path, hclguard.MaxFileBytes+1)
	if err != nil {
		return "", nil, fmt.Errorf("reading job file: %w", err)
	}
	return path, src, nil
}

// JobValidateCommand is `drover job validate`.
type JobValidateCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobValidateCommand) Synopsis() string { return "Checks if a given job specification is valid" }

const jobValidateHelp = `
Usage: drover job validate [options] <path>

  Checks the job file (HCL, Nomad's jobspec; "-" reads standard input)
  as the server would at submission, and lists every problem found, each
  at its file:line:col. Exits 0 and prints "Job validation successful"
  when there is none, 1 otherwise. The agent is asked only for its job
  types' defaults; an unreachable agent does not fail the check.

Validate Options:
` + jobFileHelp

func (c *JobValidateCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job validate", jobValidateHelp)
	var vf jobFileFlags
	vf.register(fs)
	path, code, ok := c.ParseOne(fs, args, "<path>")
	if !ok {
		return code
	}
	name, src, err := jobSource(c.ui, path)
	if err != nil {
		return c.ui.Errorf("Error getting job struct: %s", err)
	}
	client := c.Client()
	opts, err := vf.options(c.ui, jobTypeOptions(context.Background(), client))
	if err != nil {
		return c.ui.Errorf("Error getting job struct: %s", err)
	}
	opts.Namespace = fileNamespace(client)
	if _, err := jobspec.Check(name, src, opts); err != nil {
		c.ui.Errorf("Job validation errors:")
		diags := jobspec.Diagnostics(err)
		if diags == nil {
			return c.ui.Errorf("  %s", err)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			c.ui.Errorf("  %s", line)
		}
		return cli.ExitError
	}
	c.ui.Printf("Job validation successful\n")
	return cli.ExitOK
}

// fileNamespace is the namespace of a job file that names none: the
// -namespace flag's or NOMAD_NAMESPACE's, as Nomad's CLI sets it.
func fileNamespace(client *cli.APIClient) string {
	if client.Namespace == "*" {
		return ""
	}
	return client.Namespace
}

// parseJobFileLocated parses a job file with the agent's job type
// defaults and the variables of vf, and returns what places the server's
// refusal of the job at the file's blocks.
func parseJobFileLocated(ctx context.Context, ui *cli.UI, client *cli.APIClient, path string, vf *jobFileFlags) (*structs.Job, *jobspec.Locator, error) {
	name, src, err := jobSource(ui, path)
	if err != nil {
		return nil, nil, err
	}
	opts, err := vf.options(ui, jobTypeOptions(ctx, client))
	if err != nil {
		return nil, nil, err
	}
	opts.Namespace = fileNamespace(client)
	job, err := jobspec.ParseWith(name, src, opts)
	if err != nil {
		return nil, nil, err
	}
	return job, jobspec.NewLocator(name, src, opts), nil
}

// placeRefusal places the messages of the agent's 400 answer to a job
// file's job at the blocks they name (file:line:col), as job validate
// does; other errors are returned as they are.
func placeRefusal(err error, loc *jobspec.Locator) error {
	var ae *cli.APIError
	if loc == nil || !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		return err
	}
	placed := *ae
	placed.Body = loc.Annotate(strings.TrimSpace(ae.Body))
	return &placed
}
