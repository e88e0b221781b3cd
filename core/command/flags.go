package command

import (
	"bufio"
	"fmt"
	"strings"
)

// stringsFlag is a flag given any number of times.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// metaFlags collects repeated -meta key=value flags.
type metaFlags map[string]string

func (m metaFlags) String() string { return "" }

func (m metaFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("invalid metadata %q: must be key=value", v)
	}
	m[k] = val
	return nil
}

// confirm asks a yes/no question on the UI; anything but y/yes is no.
func confirm(ui *UI, question string) bool {
	ui.printf("%s ", question)
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

type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
