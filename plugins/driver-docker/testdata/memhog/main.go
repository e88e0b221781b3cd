// Command memhog allocates and touches memory until it is killed, so a
// docker test can see the engine's memory limit enforced (OOM kill). It is
// built static (CGO_ENABLED=0) into a FROM scratch image by the tests.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	var keep [][]byte
	for i := 1; ; i++ {
		b := make([]byte, 4<<20)
		for j := range b {
			if j%4096 == 0 {
				b[j] = byte(i)
			}
		}
		keep = append(keep, b)
		fmt.Fprintf(os.Stdout, "allocated %d MiB\n", 4*i)
		if i >= 1024 {
			time.Sleep(time.Hour) // 4 GiB and alive: no limit applies
		}
	}
}
