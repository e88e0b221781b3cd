package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRotatingLog(t *testing.T) {
	base := filepath.Join(t.TempDir(), "t.stdout")
	r, err := OpenRotatingLog(base, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("abcdefghij")); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	// 10 bytes in files of 4: .0 abcd, .1 efgh, .2 ij; max_files 2 keeps .1 and .2.
	for _, tc := range []struct{ file, want string }{{".0", ""}, {".1", "efgh"}, {".2", "ij"}} {
		b, _ := os.ReadFile(base + tc.file)
		if string(b) != tc.want {
			t.Errorf("%s = %q, want %q", tc.file, b, tc.want)
		}
	}
	// A new writer resumes at the newest file.
	r, err = OpenRotatingLog(base, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = r.Write([]byte("kl"))
	_ = r.Close()
	if b, _ := os.ReadFile(base + ".2"); !strings.HasPrefix(string(b), "ijkl") {
		t.Errorf(".2 after resume = %q", b)
	}
	if _, err := OpenRotatingLog(base, 0, 4); err == nil {
		t.Error("max_files 0 accepted")
	}
}
