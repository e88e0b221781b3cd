package operator

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/server/snapshotfile"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// pkiSnapshotFile is a snapshot file whose state holds a cluster PKI,
// returned with the CA and tokens as the state stores them.
func pkiSnapshotFile(t *testing.T) (file []byte, ca, toks []byte) {
	t.Helper()
	c, err := pki.NewCA("2f7c1a6e-1c1f-4d3e-9a43-6f4f3b0f9a11", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := pki.NewTokens(c.Fingerprint(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if ca, err = c.Marshal(); err != nil {
		t.Fatal(err)
	}
	if toks, err = tk.Marshal(); err != nil {
		t.Fatal(err)
	}
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PKIInit(5, &structs.ClusterPKI{CA: ca, Tokens: toks, CAFingerprint: c.Fingerprint()}); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var payload, out bytes.Buffer
	if err := fsm.WriteSnapshot(&payload, snap, "test"); err != nil {
		t.Fatal(err)
	}
	meta := snapshotfile.Meta{ID: "1-5-1", Index: 5, Term: 1, Region: "global", Created: time.Now().UTC()}
	if _, err := snapshotfile.Write(&out, meta, &payload); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), ca, toks
}

func TestOperatorSnapshotExtractCA(t *testing.T) {
	withPKI, ca, toks := pkiSnapshotFile(t)
	noPKI := testSnapshotFile(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("pki.snap", withPKI)
	cases := []struct {
		name    string
		args    func(dataDir string) []string
		seeded  bool // the data dir holds a CA before the run
		code    int
		wantOut []string
		wantErr []string
	}{
		{"seeds an empty data dir", func(d string) []string { return []string{"-data-dir", d, good} }, false, 0, []string{"Cluster CA", "server/pki"}, nil},
		{"refuses a data dir holding a CA", func(d string) []string { return []string{"-data-dir", d, good} }, true, 1, nil, []string{"holds a cluster CA already"}},
		{"needs -data-dir", func(string) []string { return []string{good} }, false, 1, nil, []string{"-data-dir is required"}},
		{"a snapshot without the cluster PKI", func(d string) []string { return []string{"-data-dir", d, write("nopki.snap", noPKI)} }, false, 1, nil, []string{"holds no cluster CA"}},
		{"a truncated snapshot", func(d string) []string {
			return []string{"-data-dir", d, write("cut.snap", withPKI[:len(withPKI)-10])}
		}, false, 1, nil, []string{"truncated"}},
	}
	f := clitest.NewFakeAgent(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			caPath := filepath.Join(dataDir, "server", "pki", "ca.json")
			if tc.seeded {
				if err := os.MkdirAll(filepath.Dir(caPath), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(caPath, []byte("other"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := f.Run(t, "", append([]string{"operator", "snapshot", "extract-ca"}, tc.args(dataDir)...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut...)
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr...)
			gotCA, caErr := os.ReadFile(caPath)
			switch {
			case tc.seeded:
				if string(gotCA) != "other" {
					t.Errorf("the existing CA was replaced: %q", gotCA)
				}
			case tc.code != 0:
				if caErr == nil {
					t.Errorf("a failed run wrote %s", caPath)
				}
			default:
				gotToks, err := os.ReadFile(filepath.Join(filepath.Dir(caPath), "tokens.json"))
				if caErr != nil || err != nil || !bytes.Equal(gotCA, ca) || !bytes.Equal(gotToks, toks) {
					t.Fatalf("seeded files differ from the snapshot's PKI (%v, %v)", caErr, err)
				}
				for _, p := range []string{caPath, filepath.Join(filepath.Dir(caPath), "tokens.json")} {
					fi, err := os.Stat(p)
					if err != nil {
						t.Fatal(err)
					}
					if fi.Mode().Perm() != 0o600 {
						t.Errorf("%s: mode %v; want 0600", p, fi.Mode().Perm())
					}
				}
				if _, err := pki.UnmarshalCA(gotCA); err != nil {
					t.Errorf("the seeded CA does not load: %v", err)
				}
			}
		})
	}
}
