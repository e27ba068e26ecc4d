// Package images builds netfleet's container images from binaries already built (`make build`),
// without a Docker engine and without pulling a base image: go-containerregistry assembles the
// image (config, manifest, digests) and writes it as an OCI image archive, which `ctr images
// import` loads and any registry tool pushes. An image holds one layer: its binary, the shared
// libraries and loader a dynamic binary needs (read from the binary's ELF headers, copied from
// the build machine), and /etc/passwd and /etc/group naming its non-root user. Layers are
// reproducible: the same binaries give the same digests.
//
// The Dockerfile builds the same images for users who have Docker; a test holds the two to the
// same entry points, users and ports. The package imports nothing from netfleet but api/netcode's
// port constants.
package images

import (
	"fmt"
	"strconv"

	"github.com/netfleet/netfleet/api/netcode"
)

// Spec says what one image holds and how it runs.
type Spec struct {
	// Repository is the image's name without a tag, e.g. ghcr.io/netfleet/operator.
	Repository string
	// Path is where the binary goes in the image; it is the entry point.
	Path string
	// UID and GID run the entry point; UserName and Home are its /etc/passwd entry.
	UID, GID       int
	UserName, Home string
	// ExposedPorts are the ports the image declares, e.g. "7777/udp".
	ExposedPorts []string
	// Static refuses a binary that needs a loader or shared libraries; otherwise they are copied
	// into the image with it.
	Static bool
}

// User is the image config's user, "uid:gid".
func (s Spec) User() string { return strconv.Itoa(s.UID) + ":" + strconv.Itoa(s.GID) }

// Ref is the image's reference at tag.
func (s Spec) Ref(tag string) string { return s.Repository + ":" + tag }

// nonroot is the user both netfleet images run as (distroless's nonroot).
const nonroot = 65532

// Operator is the operator's image: the static binary (CGO_ENABLED=0) and nothing else that can
// run, distroless-style.
var Operator = Spec{
	Repository: "ghcr.io/netfleet/operator",
	Path:       "/operator",
	UID:        nonroot, GID: nonroot,
	UserName: "nonroot", Home: "/home/nonroot",
	Static: true,
}

// GameServer is the game server's image: the binary, libenet and the C libraries it links, and
// the loader.
var GameServer = Spec{
	Repository: "ghcr.io/netfleet/gameserver",
	Path:       "/usr/local/bin/gameserver",
	UID:        nonroot, GID: nonroot,
	UserName: "gameserver", Home: "/nonexistent",
	ExposedPorts: []string{
		strconv.Itoa(netcode.DefaultGamePort) + "/udp",
		strconv.Itoa(netcode.DefaultAdminPort) + "/tcp",
	},
}

// Pause is the Pod sandbox's image, as Kubernetes builds registry.k8s.io/pause: the static pause
// program run as 65535. The local node builds it from its own pause binary, so it needs no
// registry.
var Pause = Spec{
	Repository: "localhost/netfleet/pause",
	Path:       "/pause",
	UID:        65535, GID: 65535,
	UserName: "pause", Home: "/nonexistent",
	Static: true,
}

// Validate reports a Spec that cannot make an image.
func (s Spec) Validate() error {
	switch {
	case s.Repository == "":
		return fmt.Errorf("image spec: no repository")
	case len(s.Path) < 2 || s.Path[0] != '/':
		return fmt.Errorf("image %s: binary path %q is not absolute", s.Repository, s.Path)
	case s.UID <= 0 || s.GID <= 0:
		return fmt.Errorf("image %s: user %s is root or unset; netfleet images run as non-root", s.Repository, s.User())
	case s.UserName == "" || s.Home == "":
		return fmt.Errorf("image %s: no user name or home", s.Repository)
	}
	return nil
}
