// Package testbin gives tests the repository's commands as binaries. hack/test.sh builds every
// command once, without the race detector, into bin/ (hack/build.sh: the operator with
// CGO_ENABLED=0, the rest with cgo) and names that directory in NETFLEET_PREBUILT_BIN; a test then
// runs those instead of linking its own copies. Without it (go test run by hand) the commands are
// built with go build, as before. The programs a test builds itself (GoBuild) are built with the
// commands' flags, which hack/test.sh names in NETFLEET_GO_BUILD_FLAGS, so that they reuse the
// packages the commands' build compiled. It imports nothing from netfleet.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// EnvDir names the directory of prebuilt commands.
const EnvDir = "NETFLEET_PREBUILT_BIN"

// EnvBuildFlags holds the go build flags the commands in EnvDir were built with, separated by
// spaces (hack/lib.sh GO_BUILD_FLAGS).
const EnvBuildFlags = "NETFLEET_GO_BUILD_FLAGS"

// GoBuild returns a go build command that runs in dir with env added to the environment (e.g.
// CGO_ENABLED=0) and args after the flags of EnvBuildFlags, if any: those of the commands' build,
// whose compiled packages it then reuses instead of compiling the standard library and the rest
// once more with other flags.
func GoBuild(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", append(append([]string{"build"}, strings.Fields(os.Getenv(EnvBuildFlags))...), args...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	return cmd
}

// Build returns the path of each package's binary, keyed by package (a path relative to the
// repository root, as "./cmd/operator"), each named after the package's last element. The
// binaries come from $NETFLEET_PREBUILT_BIN when it is set and holds them all; otherwise they are
// built with go build in root into dir, with env added to the environment (e.g. CGO_ENABLED=0).
func Build(root, dir string, env []string, pkgs ...string) (map[string]string, error) {
	bins := make(map[string]string, len(pkgs))
	if pre := os.Getenv(EnvDir); pre != "" {
		for _, p := range pkgs {
			bin := filepath.Join(pre, path.Base(p))
			if st, err := os.Stat(bin); err != nil || st.IsDir() {
				bins = nil
				break
			}
			bins[p] = bin
		}
		if bins != nil {
			return bins, nil
		}
		bins = make(map[string]string, len(pkgs))
	}
	cmd := GoBuild(root, env, append([]string{"-o", dir + string(filepath.Separator)}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	for _, p := range pkgs {
		bins[p] = filepath.Join(dir, path.Base(p))
	}
	return bins, nil
}
