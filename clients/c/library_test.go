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

// TestPythonCtypes drives the shared library from Python's ctypes (python/test_ctypes.py), a
// foreign FFI like Unity's P/Invoke: the schema registered as a table of structs, an allocator
// given as callbacks, the golden SNAPSHOT and CLOSE applied and read through the typed
// accessors.
func TestPythonCtypes(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	if out, err := exec.Command("make", "--no-print-directory", "lib").CombinedOutput(); err != nil {
		t.Fatalf("make lib: %v\n%s", err, out)
	}
	out, err := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", "python", "-p", "test_*.py").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
