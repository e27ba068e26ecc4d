package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/netfleet/netfleet/internal/images"
)

// k8sNamespace is containerd's namespace for the CRI: images the kubelet runs are imported there.
const k8sNamespace = "k8s.io"

// pauseRef is the sandbox image, built from the node's pause binary and pinned in containerd (the
// kubelet never collects it, and nothing pulls it).
var pauseRef = images.Pause.Ref(PauseVersion)

// containerdConfig is containerd's configuration: every path in the state directory, runc with
// cgroupfs, the CNI plugins of the node, and the plugins the node does not use turned off.
func (n *Node) containerdConfig() string {
	l, a := n.layout, n.opts.Assets
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return `version = 3
root = ` + q(l.containerdRoot) + `
state = ` + q(l.containerdState) + `
imports = []
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs", "io.containerd.internal.v1.tracing"]

[grpc]
  address = ` + q(l.containerdSock) + `

[ttrpc]
  address = ` + q(l.containerdSock+".ttrpc") + `

[plugins.'io.containerd.internal.v1.opt']
  path = ` + q(filepath.Join(l.containerdRoot, "opt")) + `

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ` + q(pauseRef) + `

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = ` + strconv.FormatBool(!hasCapability(capSysResource)) + `
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = ` + q(a.Runc) + `
        Root = ` + q(l.runcRoot) + `
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [` + q(a.CNI) + `]
    conf_dir = ` + q(l.cniConf) + `
    max_conf_num = 1
`
}

// cniConfig is the Pod network: a bridge in the node with the Pods' gateway address, host-local
// addresses of the Pod range (leases in the state directory), no masquerading (there is nowhere
// to go), and portmap for hostPorts.
func (n *Node) cniConfig() ([]byte, error) {
	p := n.plan
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "netfleet",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "nf0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": n.layout.cniIPAM,
					"ranges":  [][]map[string]string{{{"subnet": p.podCIDR.String(), "gateway": p.podGateway.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
}

// startContainerd writes the configurations, starts containerd in the node, waits for it to
// answer, and imports the pause image and the given image archives.
func (n *Node) startContainerd(ctx context.Context) (*process, error) {
	l := n.layout
	if err := os.WriteFile(l.containerdConfig, []byte(n.containerdConfig()), 0o644); err != nil {
		return nil, err
	}
	cni, err := n.cniConfig()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(l.cniConf, "10-netfleet.conflist"), cni, 0o644); err != nil {
		return nil, err
	}
	// runc and the shim are found on PATH, as containerd looks them up.
	p, err := n.startProcess("containerd", inNode, filepath.Join(n.opts.Assets.Containerd, "containerd"),
		"--config", l.containerdConfig, "--log-level", "info")
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "containerd to answer", time.Minute, []*process{p}, func() (bool, error) {
		_, err := n.ctr(ctx, "version")
		return err == nil, err
	}); err != nil {
		return p, err
	}

	pause := filepath.Join(l.images, "pause.tar")
	img, err := images.Build(images.Pause, n.opts.Assets.Pause)
	if err != nil {
		return p, err
	}
	if err := images.WriteArchive(pause, pauseRef, img); err != nil {
		return p, err
	}
	for _, archive := range append([]string{pause}, n.opts.Images...) {
		out, err := n.ctr(ctx, "images", "import", "--local", archive)
		if err != nil {
			return p, fmt.Errorf("load %s into containerd: %w", archive, err)
		}
		n.logf("loaded %s: %s", filepath.Base(archive), strings.TrimSpace(out))
	}
	return p, nil
}

// capSysResource is the capability a process needs to lower its OOM score below its parent's, as
// the kubelet asks for a Pod's sandbox and Guaranteed containers. Where netfleet-dev runs without
// it, containerd keeps each container's score at or above its own (restrict_oom_score_adj) and
// the Pods run with that score instead of failing to start.
const capSysResource = 24

// hasCapability reports whether this process has capability c in its effective set.
func hasCapability(c uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<c) != 0
		}
	}
	return false
}

// ctr runs containerd's client against the node's containerd in the CRI's namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	argv := append([]string{filepath.Join(n.opts.Assets.Containerd, "ctr"), "--address", n.layout.containerdSock, "--namespace", k8sNamespace}, args...)
	return run(ctx, 2*time.Minute, argv...)
}
