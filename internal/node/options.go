package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Versions of the node parts `make node-assets` builds into bin/node/ (hack/install-node.sh and,
// for the Kubernetes parts, hack/toolchain.sh).
const (
	KubeVersion       = "v1.37.2"
	ContainerdVersion = "v2.4.2"
	CNIPluginsVersion = "v1.10.0"
	PauseVersion      = "3.10.2"
)

// Assets are the binaries a node runs.
type Assets struct {
	// ControlPlane holds kube-apiserver and etcd (`make test-assets`).
	ControlPlane string
	// Kubernetes holds kubelet, kube-proxy, kube-scheduler and kube-controller-manager.
	Kubernetes string
	// Containerd holds containerd, containerd-shim-runc-v2 and ctr.
	Containerd string
	// CNI holds the CNI plugins bridge, host-local, portmap and loopback.
	CNI string
	// Pause is the pause program of the Pod sandbox image.
	Pause string
	// Runc is the OCI runtime (Debian's runc); found on PATH when empty.
	Runc string
}

// DefaultAssets returns the assets of a repository checkout at root: bin/k8s/<version> and
// bin/node/<part>-<version>.
func DefaultAssets(root string) Assets {
	node := filepath.Join(root, "bin", "node")
	return Assets{
		ControlPlane: filepath.Join(root, "bin", "k8s", KubeVersion),
		Kubernetes:   filepath.Join(node, "kubernetes-"+KubeVersion),
		Containerd:   filepath.Join(node, "containerd-"+ContainerdVersion),
		CNI:          filepath.Join(node, "cni-"+CNIPluginsVersion),
		Pause:        filepath.Join(node, "pause-"+PauseVersion, "pause"),
	}
}

// Options configure a node.
type Options struct {
	// Dir is the state directory: everything the node writes goes there, and it is removed by
	// nothing here (the caller owns it). It must be an absolute path outside the directories the
	// node overlays (/etc, /opt, /run, /usr, /var).
	Dir string
	// Assets are the binaries; see DefaultAssets.
	Assets Assets
	// CRDDirs are installed into the API server once it is up.
	CRDDirs []string
	// Images are OCI image archives loaded into containerd before the kubelet starts.
	Images []string
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// overlaid are the host directories the node's processes see through an overlay whose upper layer
// is in the state directory: they read the host's files and every write lands in the state
// directory (kubelet's /var/log/containers, the CNI cache in /var/lib/cni, lock files in /run).
var overlaid = []string{"/etc", "/opt", "/run", "/usr", "/var"}

// Validate checks the options and that every binary is there, with the command that installs what
// is missing.
func (o *Options) Validate() error {
	if !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("node state directory %q is not an absolute path", o.Dir)
	}
	dir := filepath.Clean(o.Dir)
	for _, d := range overlaid {
		if dir == d || strings.HasPrefix(dir, d+"/") {
			return fmt.Errorf("node state directory %s is under %s, which the node overlays; use one under /tmp", dir, d)
		}
	}
	for _, img := range o.Images {
		if _, err := os.Stat(img); err != nil {
			return fmt.Errorf("image archive: %w (run `make images`)", err)
		}
	}
	var missing []string
	check := func(dir string, names ...string) {
		for _, n := range names {
			p := filepath.Join(dir, n)
			if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
				missing = append(missing, p)
			}
		}
	}
	check(o.Assets.ControlPlane, "kube-apiserver", "etcd")
	check(o.Assets.Kubernetes, "kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager")
	check(o.Assets.Containerd, "containerd", "containerd-shim-runc-v2", "ctr")
	check(o.Assets.CNI, "bridge", "host-local", "portmap", "loopback")
	check(filepath.Dir(o.Assets.Pause), filepath.Base(o.Assets.Pause))
	if len(missing) > 0 {
		return fmt.Errorf("node binaries missing (run `make node-assets test-assets`): %s", strings.Join(missing, ", "))
	}
	if o.Assets.Runc == "" {
		p, err := exec.LookPath("runc")
		if err != nil {
			return errors.New("runc is not on PATH: install Debian's runc (`make node-assets` does)")
		}
		o.Assets.Runc = p
	}
	return nil
}
