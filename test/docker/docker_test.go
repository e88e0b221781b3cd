package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// Everything this suite creates carries labelKey=1, so that a later run can
// find what a killed run left. labelRun names the run and labelOwner the
// test process (pid and start time), so that a run removes only leftovers
// whose process is gone and never the objects of a run still going on the
// same engine (two `go test` runs of this package at once).
const (
	labelKey   = "drover-e2e"
	labelRun   = "drover-e2e.run"
	labelOwner = "drover-e2e.owner"
	imageRepo  = "drover-e2e"

	dockerTimeout = 2 * time.Minute
	buildTimeout  = 5 * time.Minute
)

// errDocker marks a docker CLI run that failed.
var errDocker = errors.New("docker command failed")

// docker runs the docker CLI and returns its trimmed stdout. The error
// carries stderr, which is where docker says why.
func docker(args ...string) (string, error) { return dockerWith(dockerTimeout, args...) }

func dockerWith(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: docker %s: %v: %s", errDocker, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// dockerAvailable reports whether a Docker engine answers.
func dockerAvailable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return err
	}
	_, err := dockerWith(30*time.Second, "info", "--format", "{{.ServerVersion}}")
	return err
}

// labelArgs are the --label flags of everything run id creates.
func labelArgs(id string) []string {
	return []string{"--label", labelKey + "=1", "--label", labelRun + "=" + id, "--label", labelOwner + "=" + ownerTag()}
}

// ownerTag names this test process so that no pid recycled later passes
// for it: "<pid>-<start time in clock ticks>".
func ownerTag() string {
	p, ok := harness.ReadProc(os.Getpid())
	if !ok {
		return strconv.Itoa(os.Getpid())
	}
	return fmt.Sprintf("%d-%d", p.PID, p.Start)
}

// ownerAlive reports whether the process an owner tag names still runs.
func ownerAlive(tag string) bool {
	pidStr, startStr, _ := strings.Cut(tag, "-")
	pid, err := strconv.Atoi(pidStr)
	if err != nil {
		return false
	}
	p, ok := harness.ReadProc(pid)
	if !ok || !p.Alive() {
		return false
	}
	return startStr == "" || startStr == strconv.FormatUint(p.Start, 10)
}

// kind is one sort of Docker object the suite creates.
type kind struct {
	name    string
	list    []string // lists IDs; the filter is appended
	inspect []string // prints a Go template of one object; the ID is appended
	remove  []string // removes objects; the IDs are appended
}

// kinds are in removal order: containers hold networks and images.
var kinds = []kind{
	{"container", []string{"ps", "-aq", "--no-trunc"}, []string{"inspect", "--type", "container", "-f"}, []string{"rm", "-f", "-v"}},
	{"network", []string{"network", "ls", "-q", "--no-trunc"}, []string{"network", "inspect", "-f"}, []string{"network", "rm"}},
	{"image", []string{"images", "-q", "--no-trunc"}, []string{"image", "inspect", "-f"}, []string{"rmi", "-f"}},
}

func (k kind) ids(filter string) ([]string, error) {
	out, err := docker(append(k.list, "--filter", "label="+filter)...)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ids []string
	for _, id := range strings.Fields(out) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (k kind) owner(id string) string {
	tmpl := `{{index .Config.Labels "` + labelOwner + `"}}`
	if k.name == "network" {
		tmpl = `{{index .Labels "` + labelOwner + `"}}`
	}
	out, err := docker(append(k.inspect, tmpl, id)...)
	if err != nil {
		return ""
	}
	return out
}

func (k kind) removeIDs(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := docker(append(k.remove, ids...)...)
	return err
}

// removeLeftovers removes what earlier runs left behind: every labelled
// object whose owning test process is gone.
func removeLeftovers() error {
	var errs []error
	for _, k := range kinds {
		ids, err := k.ids(labelKey + "=1")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var stale []string
		for _, id := range ids {
			if !ownerAlive(k.owner(id)) {
				stale = append(stale, id)
			}
		}
		if len(stale) > 0 {
			fmt.Fprintf(os.Stderr, "docker: removing %d leftover %s(s) of earlier runs\n", len(stale), k.name)
		}
		errs = append(errs, k.removeIDs(stale))
	}
	return errors.Join(errs...)
}

// removeRun removes every object of run id.
func removeRun(id string) error {
	var errs []error
	for _, k := range kinds {
		ids, err := k.ids(labelRun + "=" + id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, k.removeIDs(ids))
	}
	return errors.Join(errs...)
}

// hostPort is the loopback address on the host that a container's TCP
// port is published on. Docker publishes again, on a new host port, when
// the network carrying the mapping goes, so callers ask after each change.
func hostPort(container string, port int) (string, error) {
	out, err := docker("port", container, strconv.Itoa(port)+"/tcp")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if addr := strings.TrimSpace(line); strings.HasPrefix(addr, "127.0.0.1:") {
			return addr, nil
		}
	}
	return "", fmt.Errorf("container %s publishes port %d on no loopback address: %q", container, port, out)
}

// networkIP is a container's address on a network ("" when it is not on
// it).
func networkIP(container, network string) (string, error) {
	return docker("inspect", "--type", "container", "-f",
		`{{with index .NetworkSettings.Networks "`+network+`"}}{{.IPAddress}}{{end}}`, container)
}

// containerLogs is what the container printed, stdout and stderr
// interleaved as far as docker keeps them, last lines only.
func containerLogs(container string, tail int) string {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "logs", "--tail", strconv.Itoa(tail), container)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s\n(docker logs: %v)", out, err)
	}
	return string(out)
}
