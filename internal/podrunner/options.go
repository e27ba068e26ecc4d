package podrunner

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of Options.
const (
	DefaultNodePrefix        = "netfleet-dev"
	DefaultMaxGracePeriod    = 3 * time.Second
	DefaultMaxProbePeriod    = time.Second
	DefaultMaxRestartBackoff = 5 * time.Second
)

// DefaultFirstAddress is the first Pod address: 127.0.0.1 stays the host's own.
var DefaultFirstAddress = netip.MustParseAddr("127.0.0.2")

// firstRestartBackoff is the wait before the first restart of an exited container; each further
// restart in a crash loop doubles it up to Options.MaxRestartBackoff.
const firstRestartBackoff = 250 * time.Millisecond

// Options configure a Runner.
type Options struct {
	// Images maps an image to the local binary that stands for it. A key without a tag or digest
	// (netfleet/gameserver) matches the repository with any tag or digest; a key with one
	// (netfleet/gameserver:v1) matches that image only and wins over a repository key.
	Images map[string]string
	// Dir holds one directory per Pod with its containers' log files. Required.
	Dir string
	// Namespace limits the runner to the Pods of one namespace; empty means all namespaces.
	Namespace string
	// FirstAddress is the lowest Pod address; addresses are taken upward from it within
	// 127.0.0.0/8, skipping those ending in .0 and .255. Default DefaultFirstAddress.
	FirstAddress netip.Addr
	// NodePrefix starts the name of every Node the runner creates. Default DefaultNodePrefix.
	NodePrefix string
	// MaxGracePeriod caps a Pod's termination grace period. Default DefaultMaxGracePeriod.
	MaxGracePeriod time.Duration
	// MaxProbePeriod caps the period of readiness probes, so a Pod turns Ready soon after its
	// process does. Liveness and startup probes keep their own period, as shortening it would
	// kill slow starters. Default DefaultMaxProbePeriod.
	MaxProbePeriod time.Duration
	// MaxRestartBackoff caps the wait before restarting a crash-looping container.
	// Default DefaultMaxRestartBackoff.
	MaxRestartBackoff time.Duration
}

// Validate checks the options and makes every binary path absolute. Zero values are defaulted.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("podrunner: Dir is required")
	}
	if len(o.Images) == 0 {
		return errors.New("podrunner: the image map is empty")
	}
	images := make(map[string]string, len(o.Images))
	for image, bin := range o.Images {
		if image == "" || strings.ContainsAny(image, " \t\n") {
			return fmt.Errorf("podrunner: image %q is not an image reference", image)
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			return fmt.Errorf("podrunner: image %s: binary %q: %w", image, bin, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return fmt.Errorf("podrunner: image %s: binary: %w", image, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("podrunner: image %s: binary %s is not an executable file", image, abs)
		}
		images[image] = abs
	}
	o.Images = images
	if o.FirstAddress == (netip.Addr{}) {
		o.FirstAddress = DefaultFirstAddress
	}
	if !o.FirstAddress.Is4() || !loopback.Contains(o.FirstAddress) || o.FirstAddress == netip.MustParseAddr("127.0.0.1") {
		return fmt.Errorf("podrunner: first address %s: want an IPv4 loopback address other than 127.0.0.1", o.FirstAddress)
	}
	if o.NodePrefix == "" {
		o.NodePrefix = DefaultNodePrefix
	}
	sample := nodeName(o.NodePrefix, netip.MustParseAddr("127.255.255.254"))
	if errs := validation.IsDNS1123Subdomain(sample); len(errs) > 0 {
		return fmt.Errorf("podrunner: node prefix %q makes invalid node names: %s", o.NodePrefix, strings.Join(errs, "; "))
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"MaxGracePeriod", &o.MaxGracePeriod, DefaultMaxGracePeriod},
		{"MaxProbePeriod", &o.MaxProbePeriod, DefaultMaxProbePeriod},
		{"MaxRestartBackoff", &o.MaxRestartBackoff, DefaultMaxRestartBackoff},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			return fmt.Errorf("podrunner: %s is negative", d.name)
		}
	}
	return nil
}

// binaryFor returns the binary standing for image: an entry for the exact image wins over one for
// its repository.
func (o *Options) binaryFor(image string) (string, bool) {
	if b, ok := o.Images[image]; ok {
		return b, true
	}
	b, ok := o.Images[imageRepository(image)]
	return b, ok
}

// imageRepository returns image without its tag and digest: "registry:5000/a/b" for
// "registry:5000/a/b:v1@sha256:...".
func imageRepository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}
