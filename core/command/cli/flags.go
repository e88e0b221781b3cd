package cli

import (
	"bufio"
	"fmt"
	"strings"
)

// StringsFlag is a flag given any number of times.
type StringsFlag []string

func (s *StringsFlag) String() string { return strings.Join(*s, ",") }

func (s *StringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// MetaFlags collects repeated -meta key=value flags.
type MetaFlags map[string]string

func (m MetaFlags) String() string { return "" }

func (m MetaFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("invalid metadata %q: must be key=value", v)
	}
	m[k] = val
	return nil
}

// Confirm asks a yes/no question on the UI; anything but y/yes is no.
func Confirm(ui *UI, question string) bool {
	ui.Printf("%s ", question)
	if ui.In == nil {
		return false
	}
	line, _ := bufio.NewReader(ui.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

type StringList []string

func (s *StringList) String() string { return strings.Join(*s, ",") }

func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }
