// Command astrabox is the AstraBox platform binary: the API server, the Temporal
// worker, database migrations and the all-in-one local dev stack.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "astrabox: under construction")
	os.Exit(2)
}
