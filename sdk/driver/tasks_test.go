package driver

import (
	"errors"
	"testing"
)

func TestTasks(t *testing.T) {
	var ts Tasks[*int]
	if _, err := ts.Get("a"); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("Get of an untracked task: %v, want ErrTaskNotFound", err)
	}
	tracked, release, err := ts.Reserve("a")
	if err != nil || tracked || release == nil {
		t.Fatalf("first Reserve = %v, %v", tracked, err)
	}
	if _, _, err := ts.Reserve("a"); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("second Reserve while the first is in flight: %v, want ErrTaskExists", err)
	}
	one, other := new(int), new(int)
	ts.Add("a", one)
	release()
	if tracked, _, err := ts.Reserve("a"); err != nil || !tracked {
		t.Fatalf("Reserve of a tracked task = %v, %v; want tracked", tracked, err)
	}
	if got, err := ts.Get("a"); err != nil || got != one {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if ts.Remove("a", other) {
		t.Fatal("Remove with another task removed the tracked one")
	}
	if !ts.Remove("a", one) || ts.Remove("a", one) {
		t.Fatal("Remove must remove the tracked task once")
	}
	// Released, then removed: the ID is free again.
	if tracked, release, err := ts.Reserve("a"); err != nil || tracked {
		t.Fatalf("Reserve after removal = %v, %v", tracked, err)
	} else {
		release()
	}
}
