package structs

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// The sources an artifact may be fetched from. A client fetches over the
// network only: its own file system is not a source, whatever getter or
// form names it (file://, git::file://, a plain path, hg, a forced getter
// other than git or http).

// SplitArtifactForced splits an artifact source into its forced getter
// prefix ("git::", or "") and the rest.
func SplitArtifactForced(src string) (prefix, rest string) {
	if i := strings.Index(src, "::"); i > 0 && !strings.ContainsAny(src[:i], "/:") {
		return src[:i+2], src[i+2:]
	}
	return "", src
}

// scpLike is git's user@host:path form of an ssh source.
var scpLike = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9_][A-Za-z0-9._-]*:[^/]`) })

// shorthandHosts are the hosts go-getter's detectors turn into git URLs
// ("github.com/org/repo").
var shorthandHosts = []string{"github.com/", "gitlab.com/", "bitbucket.org/"}

// CheckArtifactSource reports why an artifact source (already
// interpolated) may not be fetched, or nil. The error states the rule and
// does not repeat the source (it may carry credentials).
func CheckArtifactSource(src string) error {
	prefix, rest := SplitArtifactForced(src)
	forced := strings.ToLower(strings.TrimSuffix(prefix, "::"))
	switch forced {
	case "", "git", "http", "https":
	default:
		return fmt.Errorf("getter %q is not supported: artifacts are fetched over http(s), git or ssh only", forced)
	}
	if rest == "" {
		return fmt.Errorf("source is empty")
	}
	if strings.HasPrefix(rest, "-") {
		return fmt.Errorf("source must not start with \"-\"")
	}
	if scpLike().MatchString(rest) {
		if forced == "http" || forced == "https" {
			return fmt.Errorf("an ssh source (user@host:path) needs the git getter")
		}
		return nil
	}
	for _, h := range shorthandHosts {
		if strings.HasPrefix(rest, h) {
			if forced == "http" || forced == "https" {
				break
			}
			return nil
		}
	}
	u, err := url.Parse(rest)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("a path on the client's file system is not an artifact source: use an http(s), git or ssh URL")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "http" || scheme == "https":
	case (scheme == "ssh" || scheme == "git") && (forced == "" || forced == "git"):
	case scheme == "file":
		return fmt.Errorf("file:// sources are refused: the client's file system is not an artifact source")
	default:
		return fmt.Errorf("scheme %q is not supported: use an http(s), git or ssh URL", u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("the URL has no host: the client's file system is not an artifact source")
	}
	if strings.HasPrefix(u.Host, "-") || strings.HasPrefix(u.User.Username(), "-") {
		return fmt.Errorf("the URL's host and user must not start with \"-\"")
	}
	if ref := u.Query().Get("ref"); strings.HasPrefix(ref, "-") {
		return fmt.Errorf("option ref must not start with \"-\"")
	}
	return nil
}
