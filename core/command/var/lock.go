package varcmd

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// LockCommand is `drover var lock [-ttl d] [-delay d] [-shell=false]
// <path> [@spec.json] <child>...`: it holds a lock on the variable while
// the child runs.
type LockCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *LockCommand) Synopsis() string { return "Run a command while holding a variable's lock" }

const lockHelp = `
Usage: drover var lock [options] <path> [<@spec file>] <child>...

  Acquires the lock of the variable at path (creating the variable when it
  does not exist, with the spec file's items), waiting while another
  holder has it, then runs child. The lock is renewed every half TTL while
  child runs and released when it exits; the command exits with child's
  code. Should a renewal fail, the lock is lost: child is sent SIGTERM and
  the command fails. Needs variables:write on the path.

Lock Options:

  -ttl <duration>
    The lock's TTL (10s to 24h). Default = 15s.

  -delay <duration>
    How long a lapsed lock (its holder stopped renewing) blocks the next
    holder. Default = 15s.

  -shell
    Runs child through $SHELL (or /bin/sh) -c. Default = true.`

func (c *LockCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("var lock", lockHelp)
	var ttl, delay time.Duration
	var shell bool
	fs.DurationVar(&ttl, "ttl", structs.DefaultVariableLockTTL, "")
	fs.DurationVar(&delay, "delay", structs.DefaultVariableDelay, "")
	fs.BoolVar(&shell, "shell", true, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) < 2 {
		return c.UsageError(fs, "This command takes a path and a child command")
	}
	if _, _, err := structs.ParseVariableLock(&structs.VariableLock{TTL: ttl.String(), LockDelay: delay.String()}); err != nil {
		return c.UsageError(fs, "%s", err)
	}
	v := &structs.Variable{Path: strings.Trim(rest[0], " /"), Lock: &structs.VariableLock{TTL: ttl.String(), LockDelay: delay.String()}}
	child := rest[1:]
	if strings.HasPrefix(child[0], "@") {
		b, err := cli.ReadInput(c.ui.In, child[0][1:], maxSpecBytes)
		if err != nil {
			return c.ui.Errorf("Error reading the variable spec: %s", err)
		}
		var spec structs.Variable
		if err := jsonUnmarshal(b, &spec); err != nil {
			return c.ui.Errorf("Error parsing the variable spec: %s", err)
		}
		v.Items = spec.Items
		child = child[1:]
		if len(child) == 0 {
			return c.UsageError(fs, "This command takes a child command")
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := c.Client()
	held, err := acquire(ctx, client, v)
	if err != nil {
		return c.ui.Errorf("Error acquiring the lock of %q: %s", v.Path, err)
	}
	c.ui.Printf("Lock acquired on %q\n", held.Path)
	lockID := held.Lock.ID

	var cmd *exec.Cmd
	if shell {
		sh := ""
		if c.ui.Getenv != nil {
			sh = c.ui.Getenv("SHELL")
		}
		if sh == "" {
			sh = "/bin/sh"
		}
		cmd = exec.Command(sh, "-c", strings.Join(child, " "))
	} else {
		cmd = exec.Command(child[0], child[1:]...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.ui.In, c.ui.Out, c.ui.Err
	if err := cmd.Start(); err != nil {
		release(client, held.Path, lockID)
		return c.ui.Errorf("Error starting the child: %s", err)
	}

	// The renewer keeps the lease until the child exits; a failed renewal
	// means the lock is lost, and the child is told to stop.
	done := make(chan struct{})
	var lost error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(ttl / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				_ = cmd.Process.Signal(syscall.SIGTERM)
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(ctx, ttl/2)
				err := client.Write(rctx, http.MethodPut, varPath(held.Path), url.Values{"lock-renew": {""}},
					&structs.Variable{Path: held.Path, Lock: &structs.VariableLock{ID: lockID}}, nil)
				cancel()
				if err != nil {
					lost = err
					_ = cmd.Process.Signal(syscall.SIGTERM)
					return
				}
			}
		}
	}()
	werr := cmd.Wait()
	close(done)
	wg.Wait()
	if lost != nil {
		return c.ui.Errorf("Lock on %q lost: %s", held.Path, lost)
	}
	if err := release(client, held.Path, lockID); err != nil {
		c.ui.Errorf("Error releasing the lock of %q: %s", held.Path, err)
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
		return cli.ExitOK
	case errors.As(werr, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	}
	return c.ui.Errorf("Child: %s", werr)
}

// acquire takes the lock, waiting while it is held or its delay runs.
func acquire(ctx context.Context, client *cli.APIClient, v *structs.Variable) (*structs.Variable, error) {
	wait := 500 * time.Millisecond
	for {
		var out structs.Variable
		err := client.Write(ctx, http.MethodPut, varPath(v.Path), url.Values{"lock-acquire": {""}}, v, &out)
		if err == nil {
			if out.Lock == nil || out.Lock.ID == "" {
				return nil, errors.New("the answer holds no lock ID")
			}
			return &out, nil
		}
		if _, conflict := conflictOf(err); !conflict {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func release(client *cli.APIClient, path, lockID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Write(ctx, http.MethodPut, varPath(path), url.Values{"lock-release": {""}},
		&structs.Variable{Path: path, Lock: &structs.VariableLock{ID: lockID}}, nil)
}
