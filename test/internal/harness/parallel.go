package harness

import (
	"flag"
	"strconv"
)

// DefaultParallel sets how many of a suite's parallel tests run at once
// (go test's -parallel, whose default is the number of CPUs) to n, unless
// the command line set -parallel. A suite whose tests spend their time
// waiting on agent processes, not computing, calls it from TestMain
// (after flag.Parse, before m.Run): on a 2-core machine two at a time
// leave the CPUs mostly idle. It reports the value in force.
func DefaultParallel(n int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return 0
	}
	set := false
	flag.Visit(func(v *flag.Flag) { set = set || v.Name == "test.parallel" })
	if !set {
		_ = f.Value.Set(strconv.Itoa(n))
	}
	v, _ := strconv.Atoi(f.Value.String())
	return v
}
