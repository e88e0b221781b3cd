package taskfiles

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	getter "github.com/hashicorp/go-getter/v2"

	"github.com/drover-org/drover/core/client/taskenv"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/safefs"
)

// A task's artifacts, fetched into its directory before its first start
// (a restart keeps what was fetched), confined to the allocation
// directory.

// Bounds of a task's artifacts: one artifact may take this long; all of
// a task's artifacts together may hold this many bytes and directory
// entries once fetched and unpacked (every getter: an HTTP download, an
// archive's unpacked files, a git clone), and one archive may unpack this
// many files (Nomad's decompression_file_count_limit default). The task
// fails with the bound past any of them.
const (
	artifactTimeout      = 30 * time.Minute
	artifactMaxBytes     = 10 << 30
	artifactMaxEntries   = 100_000
	artifactArchiveFiles = 4096
	// artifactPollEvery is how often a fetch's size is measured while it
	// runs.
	artifactPollEvery = 500 * time.Millisecond
)

// ErrArtifact marks an artifact that could not be fetched (the task's
// event is then Nomad's artifact download failure).
var ErrArtifact = errors.New("artifact download failed")

// artifactBudget is what a task's artifacts may still use.
type artifactBudget struct {
	bytes   int64
	entries int
}

// FetchArtifacts downloads each artifact into taskDir (its destination is
// relative to it and stays inside allocDir), interpolating the source,
// options, headers and destination against the task's environment. Only
// git and http(s) sources are fetched: the client's own file system is
// not a source (structs.CheckArtifactSource). Each artifact is fetched
// into a new directory of the client's, checked (size, count, no symlink
// leading out), and then moved beneath the task's directory without
// crossing a symlink a task planted there.
func FetchArtifacts(ctx context.Context, allocDir, taskDir string, arts []*structs.TaskArtifact, lookup func(string) (string, bool)) error {
	budget := &artifactBudget{bytes: artifactMaxBytes, entries: artifactMaxEntries}
	for i, a := range arts {
		if err := fetchArtifact(ctx, allocDir, taskDir, a, lookup, budget); err != nil {
			return fmt.Errorf("%w: artifact %d (%s): %w", ErrArtifact, i+1, redactURL(taskenv.Interpolate(a.GetterSource, lookup)), err)
		}
	}
	return nil
}

// gitProtocols limits the transports of every git command the client
// runs (submodules included) to the network ones: a repository's
// .gitmodules could otherwise name a path on the client's disk.
var gitProtocols sync.Once

func limitGitProtocols() {
	gitProtocols.Do(func() {
		_ = os.Setenv("GIT_ALLOW_PROTOCOL", "http:https:ssh:git")
	})
}

func fetchArtifact(ctx context.Context, allocDir, taskDir string, a *structs.TaskArtifact, lookup func(string) (string, bool), budget *artifactBudget) error {
	src := taskenv.Interpolate(a.GetterSource, lookup)
	if len(a.GetterOptions) > 0 {
		// Options travel in the URL's query, as go-getter reads them
		// (checksum, archive, ref, depth, …); the forced getter prefix
		// (git::) stays in front.
		prefix, rest := splitForced(src)
		u, err := url.Parse(rest)
		if err != nil {
			return fmt.Errorf("source: %v", err)
		}
		q := u.Query()
		keys := make([]string, 0, len(a.GetterOptions))
		for k := range a.GetterOptions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			q.Set(k, taskenv.Interpolate(a.GetterOptions[k], lookup))
		}
		u.RawQuery = q.Encode()
		src = prefix + u.String()
	}
	if err := structs.CheckArtifactSource(src); err != nil {
		return fmt.Errorf("source: %v", err)
	}
	dest := a.RelativeDest
	if dest == "" {
		dest = "local/"
	}
	// Lexically first, for a clear message; the move below resolves it
	// beneath the allocation directory.
	if _, err := containedPath(allocDir, filepath.Join(filepath.Base(taskDir), taskenv.Interpolate(dest, lookup))); err != nil {
		return fmt.Errorf("destination: %v", err)
	}
	destRel := filepath.Join(filepath.Base(taskDir), taskenv.Interpolate(dest, lookup))
	header := http.Header{}
	for k, v := range a.GetterHeaders {
		header.Set(k, taskenv.Interpolate(v, lookup))
	}
	if budget.bytes <= 0 || budget.entries <= 0 {
		// (A getter's limit of 0 means none.)
		return fmt.Errorf("%w: the task's artifacts already hold %d bytes or %d files and directories", errArtifactBound, int64(artifactMaxBytes), artifactMaxEntries)
	}
	limitGitProtocols()
	client := &getter.Client{
		Getters: []getter.Getter{
			&getter.GitGetter{Detectors: []getter.Detector{new(getter.GitHubDetector), new(getter.GitDetector), new(getter.BitBucketDetector), new(getter.GitLabDetector)}},
			&getter.HttpGetter{Header: header, XTerraformGetDisabled: true, HeadFirstTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, MaxBytes: budget.bytes},
		},
		Decompressors:   getter.LimitedDecompressors(min(artifactArchiveFiles, budget.entries), budget.bytes),
		DisableSymlinks: true,
	}
	mode := getter.ModeAny
	switch a.GetterMode {
	case structs.GetterModeFile:
		mode = getter.ModeFile
	case structs.GetterModeDir:
		mode = getter.ModeDir
	}
	// A new directory of the client's beside the task directories (the
	// allocation directory itself is not writable by tasks, and a rename
	// from it stays on one file system).
	tmp, err := os.MkdirTemp(allocDir, ".artifact-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	got := filepath.Join(tmp, "get")
	ctx, cancel := context.WithTimeout(ctx, artifactTimeout)
	defer cancel()
	gctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchArtifactSize(gctx, tmp, *budget, stop)
	}()
	_, err = client.Get(gctx, &getter.Request{Src: src, Dst: got, Pwd: tmp, GetMode: mode, DisableSymlinks: true, Umask: 0o022})
	stop(nil)
	<-watched
	if cause := context.Cause(gctx); errors.Is(cause, errArtifactBound) {
		return cause
	}
	if err != nil {
		return err
	}
	used, err := checkArtifactTree(got, *budget)
	if err != nil {
		return err
	}
	budget.bytes -= used.bytes
	budget.entries -= used.entries
	root, err := safefs.Open(allocDir)
	if err != nil {
		return err
	}
	defer root.Close()
	tmpRel := filepath.Join(filepath.Base(tmp), "get")
	if mode == getter.ModeFile {
		if dir := filepath.Dir(destRel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("destination: %w", err)
			}
		}
	}
	if err := moveBeneath(root, tmpRel, destRel); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	return nil
}

// errArtifactBound marks an artifact over one of the task's bounds.
var errArtifactBound = errors.New("artifact over its bound")

// watchArtifactSize measures the fetch directory until ctx ends and stops
// the fetch (stop's cause wraps errArtifactBound) once it holds more than
// the budget: the bound holds while a getter writes, not only after.
func watchArtifactSize(ctx context.Context, dir string, budget artifactBudget, stop context.CancelCauseFunc) {
	t := time.NewTicker(artifactPollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := checkArtifactSize(dir, budget); err != nil {
			stop(err)
			return
		}
	}
}

// checkArtifactSize sums the sizes and entries beneath dir, failing once
// they pass the budget.
func checkArtifactSize(dir string, budget artifactBudget) (artifactBudget, error) {
	var used artifactBudget
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a getter's file that came and went
			}
			return err
		}
		if p == dir {
			return nil
		}
		used.entries++
		if used.entries > budget.entries {
			return fmt.Errorf("%w: more than %d files and directories (the task's artifacts together may hold %d)", errArtifactBound, budget.entries, artifactMaxEntries)
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			used.bytes += fi.Size()
			if used.bytes > budget.bytes {
				return fmt.Errorf("%w: more than %d bytes (the task's artifacts together may hold %d)", errArtifactBound, budget.bytes, int64(artifactMaxBytes))
			}
		}
		return nil
	})
	return used, err
}

// checkArtifactTree checks a fetched artifact before it moves into the
// task's directory: within the budget, and no symlink leading out of the
// artifact (a cloned repository may hold symlinks; archives unpack none).
func checkArtifactTree(dir string, budget artifactBudget) (artifactBudget, error) {
	used, err := checkArtifactSize(dir, budget)
	if err != nil {
		return used, err
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink == 0 {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			return fmt.Errorf("%s is a symlink to the absolute path %s: an artifact's symlinks must stay inside it", rel, target)
		}
		to := filepath.Join(filepath.Dir(rel), target)
		if to == ".." || strings.HasPrefix(to, "../") {
			return fmt.Errorf("%s is a symlink to %s, outside the artifact: an artifact's symlinks must stay inside it", rel, target)
		}
		return nil
	})
	return used, err
}

// moveBeneath moves src to dst, both beneath root, merging a directory
// into one already there: an entry of dst is replaced (a symlink at its
// place is removed, not followed) and a symlink on the way to dst is
// refused.
func moveBeneath(root *safefs.Dir, src, dst string) error {
	sfi, err := root.Lstat(src)
	if err != nil {
		return err
	}
	dfi, err := root.Lstat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if dir := filepath.Dir(dst); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		return root.Rename(src, dst)
	case err != nil:
		return err
	case sfi.IsDir() && dfi.IsDir():
		ents, err := root.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := moveBeneath(root, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case dfi.IsDir():
		return fmt.Errorf("%s: a directory is in the way of the artifact's file", dst)
	case sfi.IsDir():
		// A file or a symlink where the artifact has a directory.
		if err := root.Remove(dst); err != nil {
			return err
		}
		return root.Rename(src, dst)
	default:
		return root.Rename(src, dst)
	}
}

// splitForced splits a go-getter source into its forced getter prefix
// ("git::", or "") and the URL.
func splitForced(src string) (prefix, rest string) { return structs.SplitArtifactForced(src) }

// redactURL drops a URL's user info and query (credentials, signed
// tokens) for messages and logs.
func redactURL(s string) string {
	prefix, rest := splitForced(s)
	u, err := url.Parse(rest)
	if err != nil || u.Host == "" {
		return prefix + strings.SplitN(rest, "?", 2)[0]
	}
	u.User, u.RawQuery = nil, ""
	return prefix + u.String()
}

// errPathEscapes marks a path that leaves its directory.
var errPathEscapes = errors.New("path escapes its directory")

// containedPath joins rel to dir and refuses a result outside dir (a
// lexical check, for a clear message; the writes themselves go through
// safefs beneath the allocation directory).
func containedPath(dir, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %q must be a relative file path", errPathEscapes, rel)
	}
	p := filepath.Join(dir, rel)
	r, err := filepath.Rel(dir, p)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q", errPathEscapes, rel)
	}
	return p, nil
}
