package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	getter "github.com/hashicorp/go-getter/v2"

	"github.com/drover-org/drover/core/structs"
)

// A task's artifacts and templates, laid into its directory before it
// starts: artifacts once (a restart keeps what was fetched), templates on
// every start. Both are confined to the allocation directory.

// Bounds of an artifact fetch: one artifact may take this long and be this
// large (an HTTP download); the task fails with the reason past either.
const (
	artifactTimeout  = 30 * time.Minute
	artifactMaxBytes = 10 << 30
)

// errArtifact marks an artifact that could not be fetched.
var errArtifact = errors.New("artifact download failed")

// fetchArtifacts downloads each artifact into taskDir (its destination is
// relative to it and stays inside allocDir), interpolating the source,
// options, headers and destination against the task's environment. Only
// git and http(s) sources are fetched: the client's own file system is
// not a source.
func fetchArtifacts(ctx context.Context, allocDir, taskDir string, arts []*structs.TaskArtifact, lookup func(string) (string, bool)) error {
	for i, a := range arts {
		if err := fetchArtifact(ctx, allocDir, taskDir, a, lookup); err != nil {
			return fmt.Errorf("%w: artifact %d (%s): %v", errArtifact, i+1, redactURL(interpolate(a.GetterSource, lookup)), err)
		}
	}
	return nil
}

func fetchArtifact(ctx context.Context, allocDir, taskDir string, a *structs.TaskArtifact, lookup func(string) (string, bool)) error {
	src := interpolate(a.GetterSource, lookup)
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
			q.Set(k, interpolate(a.GetterOptions[k], lookup))
		}
		u.RawQuery = q.Encode()
		src = prefix + u.String()
	}
	dest := a.RelativeDest
	if dest == "" {
		dest = "local/"
	}
	dst, err := containedPath(allocDir, filepath.Join(filepath.Base(taskDir), interpolate(dest, lookup)))
	if err != nil {
		return fmt.Errorf("destination: %v", err)
	}
	header := http.Header{}
	for k, v := range a.GetterHeaders {
		header.Set(k, interpolate(v, lookup))
	}
	client := &getter.Client{
		Getters: []getter.Getter{
			&getter.GitGetter{Detectors: []getter.Detector{new(getter.GitHubDetector), new(getter.GitDetector), new(getter.BitBucketDetector), new(getter.GitLabDetector)}},
			&getter.HttpGetter{Header: header, XTerraformGetDisabled: true, HeadFirstTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, MaxBytes: artifactMaxBytes},
		},
		DisableSymlinks: true,
	}
	mode := getter.ModeAny
	switch a.GetterMode {
	case structs.GetterModeFile:
		mode = getter.ModeFile
	case structs.GetterModeDir:
		mode = getter.ModeDir
	}
	ctx, cancel := context.WithTimeout(ctx, artifactTimeout)
	defer cancel()
	if mode == getter.ModeFile {
		// dst names the file; the destination directory must exist.
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
	}
	_, err = client.Get(ctx, &getter.Request{Src: src, Dst: dst, Pwd: taskDir, GetMode: mode, DisableSymlinks: true, Umask: 0o022})
	return err
}

// splitForced splits a go-getter source into its forced getter prefix
// ("git::", or "") and the URL.
func splitForced(src string) (prefix, rest string) {
	if i := strings.Index(src, "::"); i > 0 && !strings.Contains(src[:i], "/") {
		return src[:i+2], src[i+2:]
	}
	return "", src
}

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

// parseEnvFile reads KEY=value lines (blank lines and # comments skipped,
// an optional "export " prefix, values optionally quoted), as a template
// with env = true renders them.
func parseEnvFile(b []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), structs.MaxTemplateBytes)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		s = strings.TrimPrefix(s, "export ")
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: want KEY=value", line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out, sc.Err()
}
