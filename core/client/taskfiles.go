package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/consul-template/template"
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

// templateDenied are consul-template functions a task's template may not
// call: they run programs or write files outside the rendering (Nomad's
// default function_denylist).
var templateDenied = []string{"plugin", "writeToFile"}

// renderTemplates renders each template into the task's directory with the
// task's environment (and only it: the client's own environment is not
// visible to `env`) and returns the variables of the templates with env =
// true. A template whose data needs Consul, Vault or Nomad services or
// variables fails the task with the reason: drover serves none of them to
// templates.
func renderTemplates(allocDir, taskDir string, tmpls []*structs.Template, env map[string]string) (map[string]string, error) {
	var vars map[string]string
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)
	lookupEnv := func(k string) string { return env[k] }
	taskRel := filepath.Base(taskDir)
	for i, t := range tmpls {
		where := fmt.Sprintf("template %d (%s)", i+1, t.DestPath)
		dst, err := containedPath(allocDir, filepath.Join(taskRel, t.DestPath))
		if err != nil {
			return nil, fmt.Errorf("%s: destination: %v", where, err)
		}
		contents := t.EmbeddedTmpl
		if t.SourcePath != "" {
			src, err := containedPath(allocDir, filepath.Join(taskRel, t.SourcePath))
			if err != nil {
				return nil, fmt.Errorf("%s: source: %v", where, err)
			}
			b, err := readBounded(src, structs.MaxTemplateBytes)
			if err != nil {
				return nil, fmt.Errorf("%s: source: %v", where, err)
			}
			contents = string(b)
		}
		left, right := t.LeftDelim, t.RightDelim
		if left == "" || right == "" {
			left, right = "{{", "}}"
		}
		tm, err := template.NewTemplate(&template.NewTemplateInput{
			Contents: contents, Destination: dst, ErrMissingKey: t.ErrMissingKey,
			LeftDelim: left, RightDelim: right, FunctionDenylist: templateDenied, SandboxPath: taskDir,
			ExtFuncMap: map[string]any{
				"env": func(k string) string { return lookupEnv(k) },
				"envOrDefault": func(k, def string) string {
					if v, ok := env[k]; ok && v != "" {
						return v
					}
					return def
				},
				"mustEnv": func(k string) (string, error) {
					if v := env[k]; v != "" {
						return v, nil
					}
					return "", fmt.Errorf("environment variable %s is not set", k)
				},
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		res, err := tm.Execute(&template.ExecuteInput{Brain: template.NewBrain(), Env: envList})
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if res.Missing != nil && res.Missing.Len() > 0 {
			var names []string
			for _, d := range res.Missing.List() {
				names = append(names, d.String())
			}
			return nil, fmt.Errorf("%s: needs data drover does not serve to templates (Consul, Vault or Nomad services and variables): %s", where, strings.Join(names, ", "))
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if err := writeFileAtomic(dst, res.Output); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if err := os.Chmod(dst, os.FileMode(t.FileMode())); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if t.Uid != nil || t.Gid != nil {
			uid, gid := -1, -1
			if t.Uid != nil {
				uid = *t.Uid
			}
			if t.Gid != nil {
				gid = *t.Gid
			}
			if err := os.Lchown(dst, uid, gid); err != nil {
				return nil, fmt.Errorf("%s: set owner: %v", where, err)
			}
		}
		if t.Envvars {
			parsed, err := parseEnvFile(res.Output)
			if err != nil {
				return nil, fmt.Errorf("%s: env: %v", where, err)
			}
			if vars == nil {
				vars = map[string]string{}
			}
			for k, v := range parsed {
				vars[k] = v
			}
		}
	}
	return vars, nil
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
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
