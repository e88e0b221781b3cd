package ui_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/command"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/core/ui"
	"github.com/drover-org/drover/internal/testtier"
)

// The browser tests here drive headless Chromium against a real dev agent
// in process (server, client, raw_exec tasks, the built-in plugins
// re-executed from this test binary), so that the pages show what a
// running cluster holds. They skip without Chromium, as ui.Browser does.

// screenshots is where the page screenshots go besides the test's temp
// dir, which is removed when the test ends: go test -run Browser
// ./core/ui/ -args -screenshots=/tmp/shots keeps them.
var screenshots = flag.String("screenshots", "", "also save the browser tests' screenshots in this directory")

// waitTimeout bounds every wait: generous, for a loaded 2-core machine.
const waitTimeout = 60 * time.Second

// lockedBuffer collects the agent's log while its goroutines write it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds, failing the test after waitTimeout
// with what cond last said.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", waitTimeout, what, last)
		}
		<-tick.C
	}
}

// devAgent is a dev agent in process with its HTTP address, the
// management token (with ACLs on) and Nomad's API client holding it.
type devAgent struct {
	*agent.Agent
	URL  string
	Mgmt string
	API  *nomad.Client
	http *http.Client
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startDevAgent runs `drover agent -dev` (ACLs on when aclOn, bootstrapped)
// in process and returns once its node is ready with raw_exec. The agent
// stops when the test ends; its log is printed if the test failed.
func startDevAgent(t *testing.T, aclOn bool) *devAgent {
	t.Helper()
	testtier.Agent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP = ln.Addr().(*net.TCPAddr).Port
	cfg.Ports.RPC = freePort(t)
	if aclOn {
		cfg.ACL = &agent.ACLConfig{Enabled: true}
	}
	logs := &lockedBuffer{}
	a, err := agent.New(cfg, agent.Options{Logger: hclog.New(&hclog.LoggerOptions{Name: "agent", Level: hclog.Info, Output: logs}),
		HTTPListener: ln, PluginEnv: []string{pluginEnv + "=1"}, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatalf("starting the dev agent: %v\n%s", err, logs)
	}
	transport := &http.Transport{}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		a.Shutdown()
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	})
	d := &devAgent{Agent: a, URL: "http://" + a.HTTPAddr(), http: &http.Client{Transport: transport, Timeout: waitTimeout}}
	if aclOn {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		tok, _, err := a.Server().ACL().BootstrapACL(ctx, "")
		if err != nil {
			t.Fatalf("ACL bootstrap: %v", err)
		}
		d.Mgmt = tok.SecretID
	}
	d.API, err = nomad.NewClient(&nomad.Config{Address: d.URL, SecretID: d.Mgmt, HttpClient: d.http})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the dev node to be ready with raw_exec", func() (bool, string) {
		n := d.node(t)
		if n == nil {
			return false, "no node"
		}
		drv := n.Drivers["raw_exec"]
		return n.Status == structs.NodeStatusReady && drv != nil && drv.Healthy, fmt.Sprintf("status %s, raw_exec %+v", n.Status, drv)
	})
	return d
}

// node is the dev agent's node as the state store holds it, nil before
// it registers.
func (d *devAgent) node(t *testing.T) *structs.Node {
	t.Helper()
	nodes, err := d.Server().State().NodeList(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes[0]
}

// job is a job as the state store holds it, nil when there is none.
func (d *devAgent) job(t *testing.T, id string) *structs.Job {
	t.Helper()
	j, err := d.Server().State().JobByID(nil, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// allocs are a job's allocations as the state store holds them.
func (d *devAgent) allocs(t *testing.T, id string) []*structs.Allocation {
	t.Helper()
	as, err := d.Server().State().AllocsByJob(nil, "default", id, true)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

func (d *devAgent) register(t *testing.T, job *nomad.Job) {
	t.Helper()
	if _, _, err := d.API.Jobs().Register(job, nil); err != nil {
		t.Fatalf("registering job %s: %v", *job.ID, err)
	}
}

// runningAlloc waits for a running allocation of job and returns it.
func (d *devAgent) runningAlloc(t *testing.T, job string) *structs.Allocation {
	t.Helper()
	var out *structs.Allocation
	waitFor(t, "a running allocation of job "+job, func() (bool, string) {
		var seen []string
		for _, a := range d.allocs(t, job) {
			if a.ClientStatus == structs.AllocClientStatusRunning {
				out = a
				return true, ""
			}
			seen = append(seen, a.ClientStatus)
		}
		return false, fmt.Sprintf("allocations %v", seen)
	})
	return out
}

// tickerJob is a service job whose task prints "tick <n>" every 200 ms.
func tickerJob(id string) *nomad.Job {
	job := nomad.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	task := nomad.NewTask("ticker", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", `i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.2; done`}).
		Require(&nomad.Resources{CPU: new(100), MemoryMB: new(64)})
	tg := nomad.NewTaskGroup("web", 1).AddTask(task)
	// On the group: a job-level update block sent as JSON is not copied
	// to the groups (only the HCL parser does that), so it would make no
	// deployment.
	tg.Update = &nomad.UpdateStrategy{MaxParallel: new(1), MinHealthyTime: new(time.Second), HealthyDeadline: new(time.Minute),
		ProgressDeadline: new(2 * time.Minute)}
	job.AddTaskGroup(tg)
	return job
}

// batchJob runs script once with /bin/sh.
func batchJob(id, script string) *nomad.Job {
	job := nomad.NewBatchJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	task := nomad.NewTask("run", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", script}).
		Require(&nomad.Resources{CPU: new(50), MemoryMB: new(32)})
	job.AddTaskGroup(nomad.NewTaskGroup("run", 1).AddTask(task))
	return job
}

// tab is one browser tab for a test: a step context maker (60 s per
// step on the tab) and the console errors it saw.
type tab struct {
	t    *testing.T
	step func() (context.Context, context.CancelFunc)

	mu     sync.Mutex
	errors []consoleError
	// refused are the pages opened that answered an error status on
	// purpose: the browser logs their load as failed, which is no fault.
	refused map[string]bool
}

type consoleError struct{ text, url string }

// newTab starts Chromium (or skips the test) with a desktop-sized
// viewport and collects every console error, uncaught exception and
// browser log error (a CSP violation, a failed load) of its pages.
func newTab(t *testing.T, width, height int64) *tab {
	t.Helper()
	ctx, step := ui.Browser(t)
	b := &tab{t: t, step: step, refused: map[string]bool{}}
	msgs := chromedp.Console(ctx)
	// The range ends when the browser's context does, at the test's end.
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.errors = append(b.errors, consoleError{fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line), m.URL})
				b.mu.Unlock()
			}
		}
	}()
	sctx, cancel := step()
	defer cancel()
	if err := chromedp.Do(sctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
	return b
}

// consoleErrors are the errors seen since the last call, but for the
// failed load of a page that was meant to refuse.
func (b *tab) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.errors {
		if !(b.refused[e.url] && strings.Contains(e.text, "Failed to load resource")) {
			out = append(out, e.text)
		}
	}
	b.errors = nil
	return out
}

// note records a page's status, so that the browser's complaint about an
// error status it answered on purpose is not taken for a fault.
func (b *tab) note(url string, status int64) int64 {
	if status >= 400 {
		b.mu.Lock()
		b.refused[url] = true
		b.mu.Unlock()
	}
	return status
}

// open navigates to url and waits for its <main>; it returns the HTTP
// status of the page.
func (b *tab) open(url string) int64 {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		b.t.Fatalf("opening %s: %v", url, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
		b.t.Fatalf("%s has no <main>: %v", url, err)
	}
	return b.note(resp.URL, resp.Status)
}

// click clicks sel, which navigates (a link, a form's button), and waits
// for the page it leads to; it returns that page's status.
func (b *tab) click(sel string) int64 {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("clicking %s: %v", sel, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
		b.t.Fatalf("after clicking %s, no <main>: %v", sel, err)
	}
	return b.note(resp.URL, resp.Status)
}

// press clicks sel, which does not navigate (a script's button).
func (b *tab) press(sel string) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("clicking %s: %v", sel, err)
	}
}

func evalJS[T any](b *tab, expr string) T {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// mainText is the text of the page's <main>.
func (b *tab) mainText() string {
	b.t.Helper()
	return evalJS[string](b, `document.querySelector('main').innerText`)
}

// poll waits until the page's expression holds.
func (b *tab) poll(what, expr string) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr)); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, b.mainText())
	}
}

// screenshot saves a full-page PNG of the tab as name.png under the
// test's temp dir (and -screenshots) and logs where.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		b.t.Fatalf("screenshot %s is no PNG", name)
	}
	dirs := []string{b.t.TempDir()}
	if *screenshots != "" {
		dirs = append(dirs, *screenshots)
	}
	for _, dir := range dirs {
		path := filepath.Join(dir, b.t.Name()+"-"+name+".png")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.t.Logf("screenshot of %s: %s", name, path)
	}
}

// cookie is the browser's cookie of that name for the agent's /ui/
// pages, nil when it has none.
func (b *tab) cookie(base, name string) *network.Cookie {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/ui/jobs"}})
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// fetchHTML reads a page's HTML as the agent serves it, with token.
func (d *devAgent) fetchHTML(t *testing.T, path, token string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// hostpathPluginJob runs this test binary as the hostpath CSI driver
// (TestMain, hostpathEnv), a system job's task as a real plugin is.
func hostpathPluginJob() *nomad.Job {
	job := nomad.NewSystemJob("hostpath-plugin", "hostpath-plugin", "global", 50)
	job.Datacenters = []string{"*"}
	task := nomad.NewTask("plugin", "raw_exec").
		SetConfig("command", os.Args[0]).
		SetConfig("args", []string{"-state-dir", "${NOMAD_ALLOC_DIR}/hostpath", "-node-id", "${node.unique.id}"}).
		Require(&nomad.Resources{CPU: new(50), MemoryMB: new(64)})
	task.Env = map[string]string{hostpathEnv: "1"}
	task.CSIPluginConfig = &nomad.TaskCSIPluginConfig{ID: "hostpath", Type: nomad.CSIPluginTypeMonolith, HealthTimeout: time.Minute}
	job.AddTaskGroup(nomad.NewTaskGroup("nodes", 1).AddTask(task))
	return job
}

// TestBrowserEveryPage: on a dev agent running a service job (with its
// deployment), a finished batch job, a parameterized job and its
// dispatched child, a job that cannot be placed, and the hostpath CSI
// driver with a volume it created (claimed by a running task, as root),
// every page of the UI shows that data,
// answers 200, logs no console error, is well formed, and is
// screenshotted.
func TestBrowserEveryPage(t *testing.T) {
	b := newTab(t, 1280, 900)
	d := startDevAgent(t, false)

	d.register(t, tickerJob("web"))
	d.register(t, batchJob("once", "echo hello from once"))
	greet := batchJob("greet", `echo "hello $NOMAD_META_who"`)
	greet.ParameterizedJob = &nomad.ParameterizedJobConfig{MetaRequired: []string{"who"}}
	d.register(t, greet)
	nowhere := batchJob("nowhere", "true")
	nowhere.Constraints = []*nomad.Constraint{nomad.NewConstraint("${attr.kernel.name}", "=", "windows")}
	d.register(t, nowhere)
	d.register(t, hostpathPluginJob())
	dispatched, _, err := d.API.Jobs().Dispatch("greet", map[string]string{"who": "world"}, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}

	webAlloc := d.runningAlloc(t, "web")
	waitFor(t, "job once to complete", func() (bool, string) {
		as := d.allocs(t, "once")
		return len(as) == 1 && as[0].ClientStatus == structs.AllocClientStatusComplete, fmt.Sprintf("%d allocs", len(as))
	})
	var deployment *structs.Deployment
	waitFor(t, "the deployment of web", func() (bool, string) {
		ds, err := d.Server().State().DeploymentsByJob(nil, "default", "web")
		if err != nil || len(ds) == 0 {
			return false, fmt.Sprint(err)
		}
		deployment = ds[0]
		return true, ""
	})
	var blocked *structs.Evaluation
	waitFor(t, "the evaluation of nowhere with its placement failure", func() (bool, string) {
		es, err := d.Server().State().EvalsByJob(nil, "default", "nowhere")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range es {
			if len(e.FailedTGAllocs) > 0 {
				blocked = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d evals", len(es))
	})
	waitFor(t, "the hostpath plugin to be healthy", func() (bool, string) {
		p, err := d.Server().State().CSIPluginByID(nil, "hostpath")
		if err != nil || p == nil {
			return false, fmt.Sprint(err)
		}
		return p.ControllersHealthy == 1 && p.NodesHealthy == 1, fmt.Sprintf("%d controllers, %d nodes healthy", p.ControllersHealthy, p.NodesHealthy)
	})
	vol := &nomad.CSIVolume{ID: "ui-data", Name: "ui-data", Namespace: "default", PluginID: "hostpath",
		RequestedCapabilities: []*nomad.CSIVolumeCapability{{AccessMode: nomad.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: nomad.CSIVolumeAttachmentModeFilesystem}}}
	if _, _, err := d.API.CSIVolumes().Create(vol, nil); err != nil {
		t.Fatalf("creating volume ui-data: %v", err)
	}
	// A task that mounts the volume claims it; mounting needs root (the
	// driver bind-mounts), so without it the volume shows no claim.
	volumeWant := []string{"ui-data", "hostpath.csi.drover.dev", "single-node-writer, file-system"}
	if os.Geteuid() == 0 {
		writer := batchJob("writer", `echo ok > "${NOMAD_TASK_DIR}/../data/marker" && while :; do sleep 1; done`)
		writer.TaskGroups[0].Volumes = map[string]*nomad.VolumeRequest{"data": {Name: "data", Type: "csi", Source: "ui-data",
			AccessMode: string(nomad.CSIVolumeAccessModeSingleNodeWriter), AttachmentMode: string(nomad.CSIVolumeAttachmentModeFilesystem)}}
		writer.TaskGroups[0].Tasks[0].VolumeMounts = []*nomad.VolumeMount{{Volume: new("data"), Destination: new("/data")}}
		d.register(t, writer)
		// Before the agent stops (cleanups run last in, first out): the
		// claim is released, so that no mount outlives the test.
		t.Cleanup(func() {
			if _, _, err := d.API.Jobs().Deregister("writer", false, nil); err != nil {
				t.Errorf("stopping job writer: %v", err)
				return
			}
			waitFor(t, "the claim of ui-data to be released", func() (bool, string) {
				v, err := d.Server().State().CSIVolumeByID(nil, "default", "ui-data")
				if err != nil || v == nil {
					return false, fmt.Sprint(err)
				}
				return len(v.WriteClaims)+len(v.ReadClaims)+len(v.PastClaims) == 0,
					fmt.Sprintf("%d write, %d read, %d past claims", len(v.WriteClaims), len(v.ReadClaims), len(v.PastClaims))
			})
		})
		claimer := d.runningAlloc(t, "writer")
		volumeWant = append(volumeWant, "Claims (1)", shortID(claimer.ID), "writer.run[0], running", "write (write)\ttaken")
	} else {
		volumeWant = append(volumeWant, "none yet (set by the first claim)")
	}
	node := d.node(t)

	pages := []struct {
		name, path string
		want       []string
	}{
		{"jobs", "/ui/jobs", []string{"web", "once", "greet", "nowhere", "hostpath-plugin"}},
		{"job", "/ui/jobs/default/web", []string{"Job web", "running", shortID(webAlloc.ID)}},
		{"job-parameterized", "/ui/jobs/default/greet", []string{"Dispatched jobs", dispatched.DispatchedJobID}},
		{"allocation", "/ui/allocations/" + webAlloc.ID, []string{"ticker", "running", "Started"}},
		{"logs", "/ui/allocations/" + webAlloc.ID + "/logs?task=ticker", []string{"tick 1\n"}},
		{"nodes", "/ui/nodes", []string{"1 node\n", node.Name, "ready"}},
		{"node", "/ui/nodes/" + node.ID, []string{node.Name, "raw_exec", "healthy", "Drain…"}},
		{"servers", "/ui/servers", []string{"leader"}},
		{"plugins", "/ui/plugins", []string{"scheduler-service", "driver-rawexec", "hostpath"}},
		{"csi-plugin", "/ui/plugins/csi/hostpath", []string{"hostpath.csi.drover.dev", shortID(node.ID), "1 of 1 healthy", "ui-data"}},
		{"volumes", "/ui/volumes", []string{"ui-data", "hostpath"}},
		{"volume", "/ui/volumes/default/ui-data", volumeWant},
		{"evaluations", "/ui/evaluations", []string{"nowhere", "web"}},
		{"evaluation", "/ui/evaluations/" + blocked.ID, []string{"could not be placed", `constraint "${attr.kernel.name} = windows" filtered 1 node`}},
		{"deployments", "/ui/deployments", []string{shortID(deployment.ID), "web"}},
		{"deployment", "/ui/deployments/" + deployment.ID, []string{"web", shortID(webAlloc.ID)}},
		{"topology", "/ui/topology", []string{node.Name, "Datacenter dc1 (1 node)"}},
	}
	for _, p := range pages {
		if status := b.open(d.URL + p.path); status != http.StatusOK {
			t.Errorf("%s: status %d\n%s", p.path, status, b.mainText())
			continue
		}
		text := b.mainText()
		for _, w := range p.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q:\n%s", p.path, w, text)
			}
		}
		b.screenshot(p.name)
		if errs := b.consoleErrors(); len(errs) > 0 {
			t.Errorf("%s: console errors: %q", p.path, errs)
		}
		if err := ui.CheckWellFormed(d.fetchHTML(t, p.path, "")); err != nil {
			t.Errorf("%s is not well formed: %v", p.path, err)
		}
	}
}

func shortID(id string) string { return id[:8] }

// TestBrowserLiveLogs: the logs page of a running task, once Follow is
// pressed, shows the lines the task prints after the page was loaded,
// without a reload.
func TestBrowserLiveLogs(t *testing.T) {
	b := newTab(t, 1280, 900)
	d := startDevAgent(t, false)
	d.register(t, tickerJob("web"))
	alloc := d.runningAlloc(t, "web")
	if status := b.open(d.URL + "/ui/allocations/" + alloc.ID + "/logs?task=ticker&type=stdout"); status != http.StatusOK {
		t.Fatalf("logs page: %d\n%s", status, b.mainText())
	}
	// The highest tick on the page; a marker on window tells a reload.
	const lastTick = `Math.max(0, ...(document.getElementById('log').textContent.match(/tick \d+/g) || []).map(s => +s.slice(5)))`
	b.poll("a first tick in the log", lastTick+` > 0`)
	first := evalJS[int](b, lastTick)
	evalJS[int](b, `window.notReloaded = 1`)
	b.press("#follow-button")
	b.poll("the Follow button to be pressed", `document.getElementById('follow-button').getAttribute('aria-pressed') === 'true'`)
	b.poll("five new ticks", fmt.Sprintf(`%s >= %d`, lastTick, first+5))
	if evalJS[int](b, `window.notReloaded || 0`) != 1 {
		t.Fatal("the page was reloaded: the new lines did not come by following")
	}
	text := evalJS[string](b, `document.getElementById('log').textContent`)
	for i := 1; i <= first+5; i++ {
		if !strings.Contains(text, fmt.Sprintf("tick %d\n", i)) {
			t.Errorf("the followed log lacks tick %d: a line was lost or repeated between the tail and the stream", i)
		}
	}
	if n := strings.Count(text, fmt.Sprintf("tick %d\n", first)); n != 1 {
		t.Errorf("tick %d appears %d times: the stream repeated the tail", first, n)
	}
	b.screenshot("following")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// TestBrowserLoginOneTimeToken: with ACLs on, the address that `drover ui
// -authenticate` opens signs the browser in (an HttpOnly session cookie)
// and lands on the page asked for; the same address a second time is
// refused in words; signing out forgets the session.
func TestBrowserLoginOneTimeToken(t *testing.T) {
	b := newTab(t, 1280, 900)
	d := startDevAgent(t, true)
	d.register(t, tickerJob("web"))

	if status := b.open(d.URL + "/ui/jobs"); status != http.StatusForbidden ||
		!strings.Contains(b.mainText(), "Your token may not list jobs in any namespace.") {
		t.Fatalf("signed out, the jobs page answers %d:\n%s", status, b.mainText())
	}
	b.screenshot("signed-out")

	// The CLI, run in process, asks the agent for a one-time token and
	// hands the address to the "desktop opener", which is this browser.
	var opened []string
	var out, errOut bytes.Buffer
	env := map[string]string{"DROVER_ADDR": d.URL, "DROVER_TOKEN": d.Mgmt}
	cli := &command.UI{Out: &out, Err: &errOut, In: strings.NewReader(""), Getenv: func(k string) string { return env[k] },
		HTTP: d.http, Now: time.Now, OpenURL: func(u string) error { opened = append(opened, u); return nil }}
	if code := command.RunUI(cli, []string{"ui", "-authenticate", "web"}, nil); code != 0 || len(opened) != 1 {
		t.Fatalf("drover ui -authenticate web: exit %d, opened %q\n%s%s", code, opened, out.String(), errOut.String())
	}
	addr := opened[0]
	if !strings.HasPrefix(addr, d.URL+"/ui/settings/tokens?") || !strings.Contains(addr, "ott=") || strings.Contains(addr, d.Mgmt) {
		t.Fatalf("the address %q is not a one-time sign-in of this agent (or shows the ACL token)", addr)
	}

	if status := b.open(addr); status != http.StatusOK {
		t.Fatalf("the one-time address answers %d:\n%s", status, b.mainText())
	}
	if loc := evalJS[string](b, `location.pathname + location.search`); loc != "/ui/jobs/default/web" {
		t.Errorf("signed in, the browser is at %s, want the job page the CLI was asked for", loc)
	}
	if text := b.mainText(); !strings.Contains(text, "Job web") || !strings.Contains(text, "Stop…") {
		t.Errorf("signed in with the management token, the job page lacks the job or its actions:\n%s", text)
	}
	if !evalJS[bool](b, `!!document.querySelector('header form[action="/ui/logout"] button')`) {
		t.Error("signed in, the header has no Sign out button")
	}
	c := b.cookie(d.URL, "drover_token")
	if c == nil || !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Value != d.Mgmt || !c.Session {
		t.Fatalf("session cookie %+v: want the token the one-time token stood for, HttpOnly, SameSite=Strict, for the session only", c)
	}
	if evalJS[string](b, `document.cookie`) != "" {
		t.Error("a script can read the session cookie")
	}
	b.screenshot("signed-in")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors while signing in: %q", errs)
	}

	// The same address again: the one-time token is spent.
	if status := b.open(addr); status != http.StatusForbidden {
		t.Errorf("the one-time address used twice answers %d, want 403", status)
	}
	if text := b.mainText(); !strings.Contains(text, "This one-time token was already used or has expired") {
		t.Errorf("the second use does not say the token was used:\n%s", text)
	}
	b.screenshot("second-use-refused")

	// Sign out: the cookie goes, and the pages refuse again.
	if status := b.open(d.URL + "/ui/jobs"); status != http.StatusOK {
		t.Fatalf("still signed in, the jobs page answers %d", status)
	}
	if status := b.click(`header form[action="/ui/logout"] button`); status != http.StatusOK {
		t.Errorf("signing out answers %d", status)
	}
	if loc := evalJS[string](b, `location.pathname`); loc != "/ui/settings/tokens" {
		t.Errorf("signed out, the browser is at %s, want the sign-in page", loc)
	}
	if c := b.cookie(d.URL, "drover_token"); c != nil {
		t.Errorf("signed out, the browser still holds the session cookie %+v", c)
	}
	if status := b.open(d.URL + "/ui/jobs"); status != http.StatusForbidden {
		t.Errorf("signed out, the jobs page answers %d, want 403", status)
	}
	b.screenshot("signed-out-again")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// TestBrowserNotAllowed: a token that may read jobs and nodes but do
// nothing else, signed in through the form, is told so in words: on a
// page (the Raft servers, the plugins) instead of an empty list, and on
// actions (a job's stop, a node's drain) instead of a button, even when
// it opens an action's address directly.
func TestBrowserNotAllowed(t *testing.T) {
	b := newTab(t, 1280, 900)
	d := startDevAgent(t, true)
	d.register(t, tickerJob("web"))
	if _, err := d.API.ACLPolicies().Upsert(&nomad.ACLPolicy{Name: "look", Rules: `namespace "default" { policy = "read" }
node { policy = "read" }`}, nil); err != nil {
		t.Fatal(err)
	}
	tok, _, err := d.API.ACLTokens().Create(&nomad.ACLToken{Name: "looker", Type: "client", Policies: []string{"look"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	node := d.node(t)

	b.open(d.URL + "/ui/settings/tokens")
	ctx, cancel := b.step()
	err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("token"), tok.SecretID))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if status := b.click(`form.login button[type=submit]`); status != http.StatusOK || !strings.Contains(b.mainText(), "web") {
		t.Fatalf("signing in through the form: %d\n%s", status, b.mainText())
	}

	cases := []struct {
		name, path string
		status     int64
		want       string
		noLink     string // an action link the page must not offer
	}{
		{"servers-refused", "/ui/servers", 403, "Your token may not read the Raft configuration (operator:read).", ""},
		{"plugins-refused", "/ui/plugins", 403, "Your token may not read this agent's plugins (it needs agent:read) nor list CSI plugins (plugin:list).", ""},
		{"job-without-actions", "/ui/jobs/default/web", 200, "Your token may not stop, purge or launch this job (it needs submit-job in namespace default).", "/ui/actions/"},
		{"stop-refused", "/ui/actions/job-stop?namespace=default&job=web", 403, "Your token may not stop jobs in namespace default (it needs submit-job).", ""},
		{"node-without-actions", "/ui/nodes/" + node.ID, 200, "Your token may not drain this node or change its eligibility (it needs node:write).", "/ui/actions/"},
		{"drain-refused", "/ui/actions/node-drain?node=" + node.ID, 403, "Your token may not drain nodes (it needs node:write).", ""},
	}
	for _, c := range cases {
		if status := b.open(d.URL + c.path); status != c.status {
			t.Errorf("%s answers %d, want %d", c.path, status, c.status)
		}
		if text := b.mainText(); !strings.Contains(text, c.want) {
			t.Errorf("%s does not say %q:\n%s", c.path, c.want, text)
		}
		if c.noLink != "" && evalJS[bool](b, fmt.Sprintf(`!!document.querySelector('main a[href^=%q]')`, c.noLink)) {
			t.Errorf("%s offers an action the token may not take", c.path)
		}
		if evalJS[bool](b, `!!document.querySelector('main form[method=post]')`) {
			t.Errorf("%s shows a form the token may not send", c.path)
		}
		b.screenshot(c.name)
		if err := ui.CheckWellFormed(d.fetchHTML(t, c.path, tok.SecretID)); err != nil {
			t.Errorf("%s is not well formed: %v", c.path, err)
		}
	}
	if j := d.job(t, "web"); j == nil || j.Stop {
		t.Errorf("job web after the refusals: %+v", j)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// TestBrowserStopJob: a running job is stopped from its page (Stop…,
// then the confirmation's button), and becomes dead in the state store,
// its allocation no longer running.
func TestBrowserStopJob(t *testing.T) {
	b := newTab(t, 1280, 900)
	d := startDevAgent(t, false)
	d.register(t, tickerJob("web"))
	alloc := d.runningAlloc(t, "web")

	b.open(d.URL + "/ui/jobs/default/web")
	if status := b.click(`main a[href^="/ui/actions/job-stop?"]`); status != http.StatusOK {
		t.Fatalf("the confirmation page answers %d:\n%s", status, b.mainText())
	}
	if text := b.mainText(); !strings.Contains(text, "Stopping job web stops all of its allocations.") {
		t.Errorf("the confirmation does not say what stopping does:\n%s", text)
	}
	b.screenshot("confirm-stop")
	if j := d.job(t, "web"); j.Stop {
		t.Fatal("the job stopped before the confirmation")
	}
	if status := b.click(`form.confirm button[type=submit]`); status != http.StatusOK || !strings.Contains(b.mainText(), "Job web is stopping.") {
		t.Fatalf("confirming answers %d:\n%s", status, b.mainText())
	}
	b.screenshot("stopping")
	waitFor(t, "job web to be dead and its task stopped on the node", func() (bool, string) {
		j := d.job(t, "web")
		a, err := d.Server().State().AllocByID(nil, alloc.ID)
		if err != nil || a == nil {
			return false, fmt.Sprint(err)
		}
		return j.Stop && j.Status == structs.JobStatusDead && a.ClientTerminalStatus(),
			fmt.Sprintf("job stop=%v status=%s, alloc %s/%s", j.Stop, j.Status, a.DesiredStatus, a.ClientStatus)
	})
	if status := b.open(d.URL + "/ui/jobs/default/web"); status != http.StatusOK || !strings.Contains(b.mainText(), "dead") ||
		evalJS[bool](b, `!!document.querySelector('main a[href^="/ui/actions/job-stop?"]')`) {
		t.Errorf("the stopped job's page (%d) does not show it dead, or still offers Stop:\n%s", status, b.mainText())
	}
	b.screenshot("dead")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// TestBrowserNodeActions: from the node page, a node is drained with a
// deadline chosen in the form (none) keeping system jobs, the drain is
// stopped, and the node is marked ineligible and eligible again; each
// change is in the state store once confirmed. A batch task keeps the
// drain going: allocations that run to completion are left to finish.
func TestBrowserNodeActions(t *testing.T) {
	b := newTab(t, 1280, 900)
	d := startDevAgent(t, false)
	d.register(t, batchJob("long", "while :; do sleep 1; done"))
	d.runningAlloc(t, "long")
	node := d.node(t)
	nodePage := d.URL + "/ui/nodes/" + node.ID
	confirmAndCheck := func(link, want string, cond func(n *structs.Node) bool) {
		t.Helper()
		b.open(nodePage)
		if status := b.click(`main a[href^="/ui/actions/` + link + `?"]`); status != http.StatusOK {
			t.Fatalf("%s confirmation: %d\n%s", link, status, b.mainText())
		}
		if link == "node-drain" {
			if !evalJS[bool](b, `document.getElementById('deadline-1h').checked`) {
				t.Error("the drain form does not default to Nomad's 1h deadline")
			}
			b.press("#deadline-none")
			b.press("#ignore_system")
		}
		b.screenshot("confirm-" + link)
		if status := b.click(`form.confirm button[type=submit]`); status != http.StatusOK || !strings.Contains(b.mainText(), want) {
			t.Fatalf("confirming %s: %d, want %q\n%s", link, status, want, b.mainText())
		}
		waitFor(t, link+" in the state store", func() (bool, string) {
			n := d.node(t)
			return cond(n), fmt.Sprintf("eligibility %s, drain %+v", n.SchedulingEligibility, n.DrainStrategy)
		})
	}
	confirmAndCheck("node-drain", "is draining (deadline no deadline: wait for every allocation to migrate, system jobs stay)", func(n *structs.Node) bool {
		ds := n.DrainStrategy
		return ds != nil && ds.Deadline == 0 && ds.IgnoreSystemJobs && n.SchedulingEligibility == structs.NodeSchedulingIneligible
	})
	b.open(nodePage)
	if text := b.mainText(); !strings.Contains(text, "draining since") || !strings.Contains(text, "Stop drain…") {
		t.Errorf("the draining node's page does not say so or offer to stop:\n%s", text)
	}
	b.screenshot("draining")
	confirmAndCheck("node-drain-stop", "the node is eligible again", func(n *structs.Node) bool {
		return n.DrainStrategy == nil && n.SchedulingEligibility == structs.NodeSchedulingEligible
	})
	confirmAndCheck("node-ineligible", "is now ineligible", func(n *structs.Node) bool {
		return n.DrainStrategy == nil && n.SchedulingEligibility == structs.NodeSchedulingIneligible
	})
	confirmAndCheck("node-eligible", "is now eligible", func(n *structs.Node) bool {
		return n.SchedulingEligibility == structs.NodeSchedulingEligible
	})
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
