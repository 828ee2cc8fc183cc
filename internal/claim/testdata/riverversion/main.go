// Command riverversion prints the River release it is built with, as
// debug.ReadBuildInfo reports it: TestRiverVersionChecked runs it, because
// a test binary's build information lists no dependencies.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	_ "github.com/riverqueue/river"
)

func main() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(os.Stderr, "no build information")
		os.Exit(1)
	}
	for _, m := range bi.Deps {
		if m.Path == "github.com/riverqueue/river" {
			if m.Replace != nil {
				m = m.Replace
			}
			fmt.Println(m.Version)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "River is not a dependency")
	os.Exit(1)
}
