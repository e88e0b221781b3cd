package aclendpoint

import (
	"strings"
	"testing"
)

func TestSelectorEval(t *testing.T) {
	d := &claimData{
		Value: map[string]string{"sub": "ci-runner", "env": "production", "empty": ""},
		List:  map[string][]string{"groups": {"dev", "deployers"}, "none": {}},
	}
	cases := []struct {
		sel  string
		want bool
	}{
		{``, true},
		{`value.sub == "ci-runner"`, true},
		{`value.sub == ci-runner`, true},
		{`value.sub != "ci-runner"`, false},
		{`value.missing != "x"`, true},
		{`value.missing == "x"`, false},
		{`"deployers" in list.groups`, true},
		{`"admins" in list.groups`, false},
		{`"admins" not in list.groups`, true},
		{`list.groups contains "dev"`, true},
		{`list.groups not contains "dev"`, false},
		{`"prod" in value.env`, true},
		{`list.none is empty`, true},
		{`list.groups is empty`, false},
		{`list.groups is not empty`, true},
		{`value.empty is empty`, true},
		{`value.sub == "x" or "dev" in list.groups`, true},
		{`value.sub == "ci-runner" and "admins" in list.groups`, false},
		{`not value.sub == "x"`, true},
		{`not (value.sub == "ci-runner" and "dev" in list.groups)`, false},
		{`(value.sub == "a" or value.sub == "ci-runner") and not "admins" in list.groups`, true},
		{"value.sub == `ci-runner`", true},
		{`value.sub == "ci-\"runner"`, false},
	}
	for _, tc := range cases {
		sel, err := parseSelector(tc.sel)
		if err != nil {
			t.Errorf("%q: %v", tc.sel, err)
			continue
		}
		got := sel == nil || sel.eval(d)
		if got != tc.want {
			t.Errorf("%q = %v; want %v", tc.sel, got, tc.want)
		}
	}
}

func TestSelectorErrors(t *testing.T) {
	cases := []struct{ sel, want string }{
		{`value.sub matches "x"`, "not supported"},
		{`value.sub = "x"`, "column 11"},
		{`value.sub ==`, "expected a value"},
		{`(value.sub == "x"`, "expected )"},
		{`value.sub == "x" value.sub == "y"`, "expected and, or or the end"},
		{`sub == "x"`, "expected in or not in"},
		{`claims.sub == "x"`, "value.<claim> or list.<claim>"},
		{`list.groups == "x"`, "use contains or in"},
		{`"x" in`, "expected value.<claim>"},
		{`value.sub == "x`, "unterminated string"},
		{`value.sub == "x" and`, "unexpected end of selector"},
		{`value.sub == "x" and or`, "expected a comparison"},
		{`value.sub is full`, "expected empty"},
		{`value.sub == "x" && value.sub == "y"`, `unexpected '&'`},
		{strings.Repeat("(", 40) + `value.a == "b"` + strings.Repeat(")", 40), "nested deeper"},
	}
	for _, tc := range cases {
		_, err := parseSelector(tc.sel)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error containing %q", tc.sel, err, tc.want)
		}
	}
}

func TestInterpolateBindName(t *testing.T) {
	d := &claimData{Value: map[string]string{"project": "web", "env": "prod"}}
	cases := []struct {
		name, want string
		ok         bool
	}{
		{"plain", "plain", true},
		{"${value.project}-deploy", "web-deploy", true},
		{"${ value.project }-${value.env}", "web-prod", true},
		{"${value.missing}", "", false},
		{"${list.groups}", "", false},
		{"${value.project", "", false},
	}
	for _, tc := range cases {
		got, ok := interpolateBindName(tc.name, d)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
