//go:build linux

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/netfleet/netfleet/internal/images"
	"github.com/netfleet/netfleet/internal/testbin"
	"github.com/netfleet/netfleet/internal/testenv"
)

// build is what TestMain builds for the tier: the commands and the image archives made from them.
var build struct {
	dir, root, netfleetDev, tag        string
	operatorArchive, gameServerArchive string
}

func TestMain(m *testing.M) {
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "node tier: set-up:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		_ = os.RemoveAll(build.dir)
	} else {
		fmt.Fprintln(os.Stderr, "node tier: files kept in", build.dir)
	}
	os.Exit(code)
}

// setUp builds netfleet-dev, the operator (CGO_ENABLED=0, as make build does) and the game server,
// and the two images around the latter, tagged with the chart's appVersion (the chart's default).
func setUp() error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "netfleet-node-tier-")
	if err != nil {
		return err
	}
	build.dir, build.root = dir, root
	bins := filepath.Join(dir, "bin")
	built := map[string]string{}
	for _, b := range []struct {
		pkg string
		cgo string
	}{{"./cmd/operator", "0"}, {"./cmd/gameserver", "1"}, {"./cmd/netfleet-dev", "1"}} {
		m, err := testbin.Build(root, bins, []string{"CGO_ENABLED=" + b.cgo}, b.pkg)
		if err != nil {
			return fmt.Errorf("build %s: %w", b.pkg, err)
		}
		built[b.pkg] = m[b.pkg]
	}
	build.netfleetDev = built["./cmd/netfleet-dev"]
	chart, err := os.ReadFile(filepath.Join(root, "charts", "netfleet", "Chart.yaml"))
	if err != nil {
		return err
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &meta); err != nil {
		return fmt.Errorf("the chart's appVersion: %w", err)
	}
	if meta.AppVersion == "" {
		return errors.New("the chart has no appVersion")
	}
	build.tag = meta.AppVersion
	for _, im := range []struct {
		spec    images.Spec
		bin     string
		archive *string
	}{
		{images.Operator, "operator", &build.operatorArchive},
		{images.GameServer, "gameserver", &build.gameServerArchive},
	} {
		img, err := images.Build(im.spec, built["./cmd/"+im.bin])
		if err != nil {
			return err
		}
		*im.archive = filepath.Join(dir, im.bin+".tar")
		if err := images.WriteArchive(*im.archive, im.spec.Ref(build.tag), img); err != nil {
			return err
		}
	}
	return nil
}
