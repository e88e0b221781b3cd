package ui

import (
	"context"
	"io"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/internal/testtier"
)

// browser starts headless Chromium for one test, or skips the test when
// it is not installed (apt-get install chromium). The returned context
// bounds each step; the browser lives until the test ends.
func browser(t *testing.T) (tab context.Context, step func() (context.Context, context.CancelFunc)) {
	t.Helper()
	testtier.Browser(t)
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no Chromium on PATH: browser tests need it (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(375, 800),
		// A container's /dev/shm is often too small for Chromium's pages.
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx, func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 60*time.Second) }
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// TestBrowserNarrowScreen: on a 375 px wide screen the pages do not
// scroll sideways (wide tables scroll in their own box), the stylesheet
// applies under the CSP, and the summary bars are drawn.
func TestBrowserNarrowScreen(t *testing.T) {
	tab, step := browser(t)
	st := benchStore(t, 20, 10)
	ts := httptest.NewServer(New(Config{State: func() *state.StateStore { return st }}))
	defer ts.Close()
	for _, path := range []string{"/ui/jobs", "/ui/jobs/default/job-0007", "/ui/allocations/00000007-0000-0000-0000-000000000001"} {
		ctx, cancel := step()
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+path), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
			cancel()
			t.Fatalf("%s: %v", path, err)
		}
		if eval[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth`) {
			t.Errorf("%s scrolls sideways at 375 px", path)
		}
		if bg := eval[string](t, ctx, `getComputedStyle(document.querySelector('header')).backgroundColor`); bg != "rgb(29, 43, 58)" {
			t.Errorf("%s: header background %q: the stylesheet did not apply", path, bg)
		}
		if !strings.HasPrefix(path, "/ui/allocations/") {
			if w := eval[float64](t, ctx, `document.querySelector('.seg').getBoundingClientRect().width`); w <= 0 {
				t.Errorf("%s: summary bar segment width %v, want a drawn segment", path, w)
			}
		}
		cancel()
	}
	_ = tab
}

// TestBrowserKeyboard: the first Tab reaches the skip link, and the
// filter form works from the keyboard alone (type a prefix, press Enter).
func TestBrowserKeyboard(t *testing.T) {
	_, step := browser(t)
	st := benchStore(t, 20, 1)
	ts := httptest.NewServer(New(Config{State: func() *state.StateStore { return st }}))
	defer ts.Close()
	ctx, cancel := step()
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/ui/jobs"), chromedp.WaitReady(chromedp.CSS("main")), chromedp.KeyEvent(kb.Tab)); err != nil {
		t.Fatal(err)
	}
	if first := eval[string](t, ctx, `document.activeElement.className`); first != "skip" {
		t.Errorf("first Tab focuses %q, want the skip link", first)
	}
	err := chromedp.Do(ctx,
		chromedp.Focus(chromedp.ID("prefix")),
		chromedp.SendKeys(chromedp.ID("prefix"), "job-001"+kb.Enter),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The filtered page has loaded once its address holds the prefix. A
	// poll that the navigation interrupts is started again on the new page.
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`location.search.includes('prefix=job-001') && document.readyState === 'complete'`))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the filtered page did not load: %v", err)
		}
	}
	if rows := eval[int](t, ctx, `document.querySelectorAll('tbody tr').length`); rows != 10 { // job-0010 … job-0019
		t.Errorf("%d rows after filtering by job-001, want 10", rows)
	}
}

// followLogs serves a tail (from offset bytes before the end), then,
// followed, each string sent on more until the request or the test ends.
type followLogs struct {
	more chan string
	done chan struct{}
}

func (f followLogs) TaskLogs(ctx context.Context, _, _, _, _, origin string, offset int64, follow bool, w io.Writer) error {
	tail := "the tail\n"
	if origin == "end" && offset < int64(len(tail)) {
		tail = tail[int64(len(tail))-offset:]
	}
	if _, err := io.WriteString(w, tail); err != nil || !follow {
		return err
	}
	for {
		select {
		case s := <-f.more:
			if _, err := io.WriteString(w, s); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		case <-f.done:
			return nil
		}
	}
}

// TestBrowserFollowLogs: with script on, the Follow button (reached by
// keyboard) appends what the task writes next to the tail the server
// rendered, under the logs page's CSP.
func TestBrowserFollowLogs(t *testing.T) {
	_, step := browser(t)
	st := benchWorld(t, 1, 2)
	fl := followLogs{more: make(chan string), done: make(chan struct{})}
	ts := httptest.NewServer(New(Config{State: func() *state.StateStore { return st }, Logs: fl}))
	defer ts.Close()
	defer close(fl.done) // ends the followed request before the server closes
	ctx, cancel := step()
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/ui/allocations/"+allocRunning+"/logs?task=t"),
		chromedp.WaitVisible(chromedp.ID("follow-button")),
		chromedp.Focus(chromedp.ID("follow-button")), chromedp.KeyEvent(kb.Enter),
		chromedp.Poll[chromedp.Void](`document.getElementById('follow-button').getAttribute('aria-pressed') === 'true'`))
	if err != nil {
		t.Fatalf("the Follow button did not start following: %v", err)
	}
	select {
	case fl.more <- "a followed line\n":
	case <-ctx.Done():
		t.Fatal("the page never opened the followed stream")
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.getElementById('log').textContent === 'the tail\na followed line\n'`)); err != nil {
		t.Fatalf("the followed line did not appear after the tail: %q", eval[string](t, ctx, `document.getElementById('log').textContent`))
	}
}

// TestBrowserNewPagesNarrow: the pages added with issue 12 do not scroll
// sideways at 375 px either.
func TestBrowserNewPagesNarrow(t *testing.T) {
	_, step := browser(t)
	st := benchWorld(t, 20, 4)
	ts := httptest.NewServer(New(Config{State: func() *state.StateStore { return st }, Actions: &fakeActions{}}))
	defer ts.Close()
	for _, path := range []string{"/ui/topology", "/ui/evaluations", "/ui/evaluations/" + worldEvalID(0), "/ui/deployments",
		"/ui/deployments/" + worldDepID(0), "/ui/volumes/default/vol-000", "/ui/plugins",
		"/ui/actions/job-dispatch?namespace=default&job=batchp", "/ui/actions/node-drain?node=node-001", "/ui/nodes/node-001"} {
		ctx, cancel := step()
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+path), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
			cancel()
			t.Fatalf("%s: %v", path, err)
		}
		if eval[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth`) {
			t.Errorf("%s scrolls sideways at 375 px", path)
		}
		cancel()
	}
}
