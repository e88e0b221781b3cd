package events

import (
	"fmt"
	"slices"
	"strings"
)

// MaxTopics bounds the topic parameters of one subscription.
const MaxTopics = 64

// Filter selects the events a subscription receives. The zero Filter and
// a nil *Filter pass everything.
type Filter struct {
	// Topics maps a topic (or "*") to the keys wanted ("*": all). An
	// event passes when its topic (or "*") lists its Key or one of its
	// FilterKeys. Empty: every topic.
	Topics map[string][]string
	// Namespace keeps events of that namespace and events of no
	// namespace (nodes, ACL objects, CSI plugins, namespaces); "*" or ""
	// keeps every namespace.
	Namespace string
	// Allow is the caller's ACL, asked per event that passed the rest;
	// nil allows everything.
	Allow func(e *Event) bool
}

// ParseTopics reads Nomad's topic parameters ("Topic", "Topic:Key",
// "*:*"). No parameter subscribes to everything.
func ParseTopics(params []string) (map[string][]string, error) {
	if len(params) > MaxTopics {
		return nil, fmt.Errorf("at most %d topic parameters are allowed, got %d", MaxTopics, len(params))
	}
	out := map[string][]string{}
	if len(params) == 0 {
		out[TopicAll] = []string{"*"}
		return out, nil
	}
	for _, p := range params {
		topic, key, found := strings.Cut(p, ":")
		if !found {
			key = "*"
		}
		if topic == "" || key == "" {
			return nil, fmt.Errorf("invalid topic %q: expected Topic or Topic:Key", p)
		}
		if topic != TopicAll && !slices.Contains(Topics, topic) {
			return nil, fmt.Errorf("unknown topic %q: expected one of %s or *", topic, strings.Join(Topics, ", "))
		}
		if !slices.Contains(out[topic], key) {
			out[topic] = append(out[topic], key)
		}
	}
	return out, nil
}

// Match reports whether one event passes the filter.
func (f *Filter) Match(e *Event) bool {
	if f == nil {
		return true
	}
	if f.Namespace != "" && f.Namespace != "*" && e.Namespace != "" && e.Namespace != f.Namespace {
		return false
	}
	if len(f.Topics) > 0 && !keysMatch(f.Topics[e.Topic], e) && !keysMatch(f.Topics[TopicAll], e) {
		return false
	}
	return f.Allow == nil || f.Allow(e)
}

func keysMatch(keys []string, e *Event) bool {
	for _, k := range keys {
		if k == "*" || k == e.Key || slices.Contains(e.FilterKeys, k) {
			return true
		}
	}
	return false
}

// Apply returns the batch's events that pass: the batch itself when all
// do, a new batch of the passing ones, or nil when none does.
func (f *Filter) Apply(b *Batch) *Batch {
	if f == nil {
		return b
	}
	var kept []*Event
	for i, e := range b.Events {
		if f.Match(e) {
			if kept != nil {
				kept = append(kept, e)
			}
			continue
		}
		if kept == nil {
			kept = make([]*Event, i, len(b.Events))
			copy(kept, b.Events[:i])
		}
	}
	switch {
	case kept == nil:
		return b
	case len(kept) == 0:
		return nil
	}
	return &Batch{Index: b.Index, Events: kept}
}
