package structs

import (
	"strings"
	"testing"
)

// TestCheckArtifactSource: network sources pass; every form that reads the
// client's disk, or smuggles an option to git, is refused with the rule.
func TestCheckArtifactSource(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"https://example.com/app.tar.gz", ""},
		{"http://example.com/app.tar.gz?checksum=sha256:00", ""},
		{"git::https://github.com/org/repo.git?ref=v1", ""},
		{"git::ssh://git@example.com/org/repo", ""},
		{"git@github.com:org/repo.git", ""},
		{"github.com/org/repo", ""},
		{"git://example.com/repo", ""},
		{"file:///etc/passwd", "file:// sources are refused"},
		{"git::file:///srv/repo", "file:// sources are refused"},
		{"git::/srv/repo", "client's file system is not an artifact source"},
		{"git::../repo", "client's file system is not an artifact source"},
		{"/etc/passwd", "client's file system is not an artifact source"},
		{"./x", "client's file system is not an artifact source"},
		{"hg::https://example.com/r", `getter "hg" is not supported`},
		{"s3::https://s3.amazonaws.com/b/k", `getter "s3" is not supported`},
		{"ftp://example.com/x", `scheme "ftp" is not supported`},
		{"https::git@github.com:org/repo", "needs the git getter"},
		{"git::ssh://-oProxyCommand=x/y", `must not start with "-"`},
		{"git::https://example.com/r?ref=--upload-pack=x", `option ref must not start with "-"`},
		{"-u", `must not start with "-"`},
	} {
		err := CheckArtifactSource(tc.src)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}

// A job whose artifact reads the client's disk is refused at submit; an
// interpolated source waits for the client.
func TestValidateArtifactSource(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"git::file:///srv/repo", "artifact 1: source: file:// sources are refused"},
		{"https://${NOMAD_META_host}/x.tgz", ""},
	} {
		j := &Job{ID: "j", Type: "sysbatch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
			Name: "g", Tasks: []*Task{{Name: "t", Driver: "raw_exec", Artifacts: []*TaskArtifact{{GetterSource: tc.src}}}},
		}}}
		j.Canonicalize()
		err := j.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", tc.src, err, tc.want)
		}
	}
}
