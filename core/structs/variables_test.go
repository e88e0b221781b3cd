package structs

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestValidateVariablePath(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"a", true}, {"a/b-c_d~e", true}, {"nomad/jobs", true}, {"nomad/jobs/web/g/t", true},
		{strings.Repeat("a", 128), true}, {strings.Repeat("a", 129), false},
		{"", false}, {"a b", false}, {"a.b", false}, {"a@b", false}, {"a//b", false}, {"é", false},
		{"nomad", false}, {"nomad/other", false}, {"nomad/jobsx", false},
	} {
		if err := ValidateVariablePath(c.path); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok=%v", c.path, err, c.ok)
		} else if err != nil && KindName(err) != "invalid" {
			t.Errorf("%q: kind %q", c.path, KindName(err))
		}
	}
}

func TestValidateVariableItems(t *testing.T) {
	many := VariableItems{}
	for i := range MaxVariableItems + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, c := range []struct {
		name  string
		items VariableItems
		kind  string
	}{
		{"ok", VariableItems{"k": "v"}, ""},
		{"none", nil, "invalid"},
		{"empty key", VariableItems{"": "v"}, "invalid"},
		{"long key", VariableItems{strings.Repeat("k", MaxVariableKeyLength+1): "v"}, "invalid"},
		{"too many", many, "invalid"},
		{"too large", VariableItems{"k": strings.Repeat("v", MaxVariableSize)}, "too_large"},
	} {
		if got := KindName(ValidateVariableItems(c.items)); got != c.kind {
			t.Errorf("%s: kind %q, want %q", c.name, got, c.kind)
		}
	}
}

func TestParseVariableLock(t *testing.T) {
	for _, c := range []struct {
		lock       *VariableLock
		ttl, delay time.Duration
		ok         bool
	}{
		{nil, DefaultVariableLockTTL, DefaultVariableDelay, true},
		{&VariableLock{TTL: "1m", LockDelay: "0s"}, time.Minute, 0, true},
		{&VariableLock{TTL: "9s"}, 0, 0, false},
		{&VariableLock{TTL: "25h"}, 0, 0, false},
		{&VariableLock{TTL: "x"}, 0, 0, false},
		{&VariableLock{LockDelay: "-1s"}, 0, 0, false},
	} {
		ttl, delay, err := ParseVariableLock(c.lock)
		if (err == nil) != c.ok || (c.ok && (ttl != c.ttl || delay != c.delay)) {
			t.Errorf("%+v: %s %s %v", c.lock, ttl, delay, err)
		}
	}
}

func TestVariableLockHeldAndBlocked(t *testing.T) {
	now := time.Unix(1000, 0)
	v := &VariableEncrypted{LockID: "L", LockTTL: 10 * time.Second, LockDelay: 5 * time.Second, LockExpires: now.Add(10 * time.Second).UnixNano()}
	if !v.LockHeld(now) || v.APILock(now, false) == nil || v.APILock(now, false).ID != "" || v.APILock(now, true).ID != "L" {
		t.Error("a live lock is not shown held")
	}
	later := now.Add(12 * time.Second)
	if v.LockHeld(later) || !v.LockBlocked(later) || v.APILock(later, true) != nil {
		t.Error("a lapsed lock within its delay")
	}
	if v.LockBlocked(now.Add(16 * time.Second)) {
		t.Error("a lapsed lock past its delay still blocks")
	}
}
