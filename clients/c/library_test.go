// Package cclient holds netfleet's client library in C (include/netfleet.h, src/), built on the
// system libenet; its tests build it with gcc and run its own tests, fuzz targets, bot and
// Python binding against the Go server and client.
package cclient

import (
	"os/exec"
	"testing"
)

// TestCLibrary builds the library and runs its tests under AddressSanitizer and
// UndefinedBehaviorSanitizer (make test in this directory): the golden vectors
// (test/test_golden.c), the client's rules (test/test_client.c), and every fuzz target over its
// checked-in corpus and a bounded number of mutated inputs (fuzz/).
func TestCLibrary(t *testing.T) {
	out, err := exec.Command("make", "--no-print-directory", "lib", "test").CombinedOutput()
	if err != nil {
		t.Fatalf("make test: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
