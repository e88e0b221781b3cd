package countsched

import (
	"strconv"
	"strings"
)

// allocIndex parses the index of "<job>.<group>[<i>]"; -1 when malformed,
// so that such an alloc is stopped rather than mistaken for index 0.
func allocIndex(name string) int {
	open := strings.LastIndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	i, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil || i < 0 {
		return -1
	}
	return i
}
