// Package python holds netfleet's protocol client in Python (netfleet.py), written from
// docs/protocol.md alone; its test runs the client's own tests against the golden vectors.
package python

import (
	"os/exec"
	"testing"
)

// TestPythonClient runs the Python client's tests: every golden vector decodes to its meaning
// and encodes to its bytes, and no input makes a decoder fail but with Malformed.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	out, err := exec.Command(py, "-m", "unittest", "discover", "-s", ".", "-p", "test_*.py").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
