// Command images builds netfleet's images as OCI image archives from the binaries `make build`
// put in bin/ (internal/images): the operator's and the game server's, tagged with the chart's
// appVersion unless -tag says otherwise. `ctr images import` loads an archive; a registry tool
// (crane push, skopeo copy oci-archive:...) pushes it.
//
//	go run ./hack/images -bin bin -out _out/images
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/netfleet/netfleet/internal/images"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding the operator and gameserver binaries")
	out := flag.String("out", "_out/images", "directory the archives are written to")
	chart := flag.String("chart", "charts/netfleet/Chart.yaml", "the chart whose appVersion is the default tag")
	tag := flag.String("tag", "", "image tag (default: the chart's appVersion)")
	flag.Parse()
	if err := run(*bin, *out, *chart, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(bin, out, chart, tag string) error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if tag == "" {
		var err error
		if tag, err = appVersion(chart); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, im := range []struct {
		spec   images.Spec
		binary string
	}{
		{images.Operator, "operator"},
		{images.GameServer, "gameserver"},
	} {
		binary := filepath.Join(bin, im.binary)
		if _, err := os.Stat(binary); err != nil {
			return fmt.Errorf("%w (run `make build` first)", err)
		}
		img, err := images.Build(im.spec, binary)
		if err != nil {
			return err
		}
		ref := im.spec.Ref(tag)
		archive := filepath.Join(out, im.binary+".tar")
		if err := images.WriteArchive(archive, ref, img); err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		files, err := images.Contents(im.spec, binary)
		if err != nil {
			return err
		}
		fmt.Printf("%s  %s@%s  (%d entries, user %s)\n", archive, ref, digest, len(files), im.spec.User())
	}
	return nil
}

// appVersion reads the chart's appVersion, the tag its default values pull.
func appVersion(chart string) (string, error) {
	b, err := os.ReadFile(chart)
	if err != nil {
		return "", fmt.Errorf("read the chart for its appVersion (or pass -tag): %w", err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("%s: %w", chart, err)
	}
	if c.AppVersion == "" {
		return "", errors.New(chart + " has no appVersion; pass -tag")
	}
	return c.AppVersion, nil
}
