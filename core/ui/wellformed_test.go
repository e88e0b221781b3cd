package ui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// voidElements have no end tag.
var voidElements = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}

// closesP are the start tags that an HTML parser reads as closing an open
// <p>: written inside one, the document's tree is not the one the source
// shows.
var closesP = map[string]bool{"address": true, "article": true, "aside": true, "blockquote": true, "details": true, "div": true,
	"dl": true, "fieldset": true, "figure": true, "footer": true, "form": true, "h1": true, "h2": true, "h3": true, "h4": true,
	"h5": true, "h6": true, "header": true, "hr": true, "main": true, "nav": true, "ol": true, "p": true, "pre": true,
	"section": true, "table": true, "ul": true}

// checkWellFormed reports the first way in which an HTML page is not
// well formed, at its line: a doctype that is not first, a tag the
// tokenizer cannot read, an element closed out of order or left open,
// an end tag of a void element or a self-closed non-void one, a block
// inside a <p>, a form in a form or a link in a link, an id used twice, or a label or
// aria-labelledby naming no id.
func checkWellFormed(page []byte) error {
	z := html.NewTokenizer(bytes.NewReader(page))
	line := 1
	type open struct {
		name string
		line int
	}
	var stack []open
	ids := map[string]int{}
	var refs []open // ids that labels and aria-labelledby name, at their line
	inside := func(name string) bool {
		for _, o := range stack {
			if o.name == name {
				return true
			}
		}
		return false
	}
	first := true
	for {
		tt := z.Next()
		raw := z.Raw()
		at := line
		line += bytes.Count(raw, []byte("\n"))
		switch tt {
		case html.ErrorToken:
			if !errors.Is(z.Err(), io.EOF) {
				return fmt.Errorf("line %d: %v", at, z.Err())
			}
			if len(stack) > 0 {
				o := stack[len(stack)-1]
				return fmt.Errorf("line %d: <%s> is never closed", o.line, o.name)
			}
			for _, r := range refs {
				if _, ok := ids[r.name]; !ok {
					return fmt.Errorf("line %d: a label or aria-labelledby names id %q, which no element has", r.line, r.name)
				}
			}
			return nil
		case html.TextToken:
			if first && len(bytes.TrimSpace(raw)) == 0 {
				continue
			}
		case html.CommentToken:
			continue
		}
		if first {
			if tt != html.DoctypeToken || !strings.EqualFold(string(z.Text()), "html") {
				return fmt.Errorf("line %d: the page does not start with <!doctype html>", at)
			}
			first = false
			continue
		}
		switch tt {
		case html.DoctypeToken:
			return fmt.Errorf("line %d: a second doctype", at)
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				key := string(k)
				switch {
				case key == "id":
					if prev, dup := ids[string(v)]; dup {
						return fmt.Errorf("line %d: id %q is used on line %d already", at, v, prev)
					}
					ids[string(v)] = at
				case key == "for" && tag == "label", key == "aria-labelledby":
					for _, id := range strings.Fields(string(v)) {
						refs = append(refs, open{id, at})
					}
				}
			}
			if tt == html.SelfClosingTagToken && !voidElements[tag] {
				return fmt.Errorf("line %d: <%s/> is not a void element and cannot close itself", at, tag)
			}
			if closesP[tag] && len(stack) > 0 && stack[len(stack)-1].name == "p" {
				return fmt.Errorf("line %d: <%s> inside the <p> of line %d (a parser closes the <p> first)", at, tag, stack[len(stack)-1].line)
			}
			if (tag == "form" || tag == "a") && inside(tag) {
				return fmt.Errorf("line %d: <%s> inside another <%s>", at, tag, tag)
			}
			if !voidElements[tag] {
				stack = append(stack, open{tag, at})
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if voidElements[tag] {
				return fmt.Errorf("line %d: </%s> ends a void element", at, tag)
			}
			if len(stack) == 0 {
				return fmt.Errorf("line %d: </%s> closes nothing", at, tag)
			}
			if o := stack[len(stack)-1]; o.name != tag {
				return fmt.Errorf("line %d: </%s> closes the <%s> of line %d", at, tag, o.name, o.line)
			}
			stack = stack[:len(stack)-1]
		}
	}
}

// TestCheckWellFormed: the checker passes a well-formed page and finds
// each kind of fault at its line.
func TestCheckWellFormed(t *testing.T) {
	page := func(body string) string {
		return "<!doctype html>\n<html lang=\"en\">\n<head><title>t</title></head>\n<body>\n" + body + "\n</body>\n</html>\n"
	}
	cases := []struct{ name, doc, want string }{
		{"good", page(`<p>a<br>b <input id="x"> <label for="x">x</label></p><section aria-labelledby="h"><h2 id="h">h</h2></section>`), ""},
		{"no doctype", "<html></html>", "does not start with <!doctype html>"},
		{"unclosed", page("<div><p>x</p>"), "line 6: </body> closes the <div> of line 5"},
		{"never closed", "<!doctype html>\n<div>", "line 2: <div> is never closed"},
		{"misnested", page("<div><span></div></span>"), "line 5: </div> closes the <span> of line 5"},
		{"stray end", page("</div>"), "line 5: </div> closes the <body> of line 4"},
		{"void end tag", page("<br></br>"), "</br> ends a void element"},
		{"self-closed div", page("<div/>"), "<div/> is not a void element"},
		{"block in p", page("<p>\n<div>x</div></p>"), "line 6: <div> inside the <p> of line 5"},
		{"nested form", page(`<form><form></form></form>`), "<form> inside another <form>"},
		{"duplicate id", page("<h2 id=\"a\">a</h2>\n<h2 id=\"a\">b</h2>"), `line 6: id "a" is used on line 5 already`},
		{"dangling label", page(`<label for="nosuch">x</label>`), `names id "nosuch"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkWellFormed([]byte(c.doc))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("a well-formed page refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestEveryPageWellFormed: every page of the UI, with data on it (ACLs
// off, so that nothing is withheld), and the error, sign-in and
// confirmation pages, are well formed.
func TestEveryPageWellFormed(t *testing.T) {
	st := benchWorld(t, 12, 4)
	u := New(Config{State: func() *state.StateStore { return st }, Region: "global", Actions: &fakeActions{},
		Logs: fakeLogs{allocRunning + "/t/stdout": "line one\n"},
		AgentPlugins: func() []structs.AgentPlugin {
			return []structs.AgentPlugin{{Name: "system", Kind: "scheduler", Builtin: true, Version: "0.4.0", Health: structs.AgentPluginHealthy}}
		}})
	paths := []string{"/ui/jobs", "/ui/jobs?status=running&type=service", "/ui/jobs/default/job-0000", "/ui/jobs/default/nightly",
		"/ui/jobs/default/batchp", "/ui/jobs/default/nightly/periodic-1700000000", "/ui/allocations/" + allocRunning,
		"/ui/allocations/" + allocRunning + "/logs?task=t", "/ui/nodes", "/ui/nodes/node-000", "/ui/servers",
		"/ui/evaluations", "/ui/evaluations/" + worldEvalID(0), "/ui/deployments", "/ui/deployments/" + worldDepID(0),
		"/ui/volumes", "/ui/volumes/default/vol-000", "/ui/plugins", "/ui/plugins/csi/hp", "/ui/topology",
		"/ui/login", "/ui/settings/tokens", "/ui/jobs/default/nosuch",
		"/ui/actions/job-stop?namespace=default&job=job-0001", "/ui/actions/job-dispatch?namespace=default&job=batchp",
		"/ui/actions/deployment-promote?deployment=" + worldDepID(0), "/ui/actions/node-drain?node=node-001",
		"/ui/actions/node-ineligible?node=node-001"}
	for _, p := range paths {
		rec := get(u, p, "")
		if rec.Code != 200 && p != "/ui/jobs/default/nosuch" {
			t.Errorf("GET %s: %d\n%s", p, rec.Code, rec.Body.String())
			continue
		}
		if err := checkWellFormed(rec.Body.Bytes()); err != nil {
			t.Errorf("GET %s is not well formed: %v", p, err)
		}
	}
}
