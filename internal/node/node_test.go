package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// fakeAssets makes a directory tree with every binary the node needs, as empty executables.
func fakeAssets(t *testing.T) Assets {
	t.Helper()
	root := t.TempDir()
	a := DefaultAssets(root)
	for dir, names := range map[string][]string{
		a.ControlPlane:        {"kube-apiserver", "etcd"},
		a.Kubernetes:          {"kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager"},
		a.Containerd:          {"containerd", "containerd-shim-runc-v2", "ctr"},
		a.CNI:                 {"bridge", "host-local", "portmap", "loopback"},
		filepath.Dir(a.Pause): {"pause"},
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return a
}

func TestValidate(t *testing.T) {
	assets := fakeAssets(t)
	runc := filepath.Join(t.TempDir(), "runc")
	if err := os.WriteFile(runc, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	assets.Runc = runc
	ok := Options{Dir: t.TempDir(), Assets: assets}
	if err := ok.Validate(); err != nil {
		t.Fatalf("complete options: %v", err)
	}
	missing := assets
	missing.CNI = filepath.Join(t.TempDir(), "none")
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"relative dir", Options{Dir: "state", Assets: assets}, "not an absolute path"},
		{"dir under /var", Options{Dir: "/var/tmp/node", Assets: assets}, "under /var, which the node overlays"},
		{"dir is /run", Options{Dir: "/run", Assets: assets}, "under /run"},
		{"missing plugins", Options{Dir: t.TempDir(), Assets: missing}, "make node-assets"},
		{"missing image", Options{Dir: t.TempDir(), Assets: assets, Images: []string{"/nonexistent/operator.tar"}}, "make images"},
	} {
		err := c.opts.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// Every missing binary is named.
	o := Options{Dir: t.TempDir(), Assets: missing}
	err := o.Validate()
	for _, n := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if err == nil || !strings.Contains(err.Error(), filepath.Join(missing.CNI, n)) {
			t.Errorf("missing %s not named: %v", n, err)
		}
	}
}

func TestPreflightRefusesWhatIsNotRunc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("preflight refuses a non-root user first")
	}
	dir := t.TempDir()
	notRunc := filepath.Join(dir, "runc")
	if err := os.WriteFile(notRunc, []byte("#!/bin/sh\necho crun version 1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "failing-runc")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'runc: cannot start' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for bin, want := range map[string]string{notRunc: "not runc's version", failing: "runc does not run"} {
		err := preflight(context.Background(), Options{Assets: Assets{Runc: bin}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", bin, err, want)
		}
	}
}

func TestPlan(t *testing.T) {
	p := newPlan(7)
	for got, want := range map[string]string{
		p.hostIP.String(): "10.251.7.1", p.nodeIP.String(): "10.251.7.2", p.linkPrefix.String(): "10.251.7.0/30",
		p.podCIDR.String(): "10.252.7.0/24", p.podGateway.String(): "10.252.7.1",
		p.serviceCIDR.String(): "10.253.7.0/24", p.serviceIP.String(): "10.253.7.1",
		p.hostLink: "nfnode7", p.cgroup: "netfleet-node-7",
	} {
		if got != want {
			t.Errorf("plan 7: %s, want %s", got, want)
		}
	}
	if !p.linkPrefix.Contains(p.hostIP) || !p.linkPrefix.Contains(p.nodeIP) || !p.podCIDR.Contains(p.podGateway) || !p.serviceCIDR.Contains(p.serviceIP) {
		t.Error("an address is outside its range")
	}
	if len(p.hostLink) > 15 {
		t.Errorf("link name %q is longer than an interface name can be", p.hostLink)
	}
	taken := []netip.Prefix{netip.MustParsePrefix("10.252.7.128/25")}
	if p.free(taken) {
		t.Error("plan 7 is free although its Pod range overlaps a used address")
	}
	if !newPlan(8).free(taken) {
		t.Error("plan 8 is taken by plan 7's range")
	}
}

func TestRoutesReadsTheKernelsTable(t *testing.T) {
	// The machine has a route to its loopback network at least; a range no one routes has none.
	got, err := routes(netip.MustParsePrefix("10.252.250.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if !strings.Contains(r, "10.252.250.") {
			t.Errorf("route %q outside the range asked for", r)
		}
	}
}

func TestKubeletConfig(t *testing.T) {
	n := &Node{plan: newPlan(3), layout: newLayout("/tmp/state")}
	b, err := n.kubeletConfig("/tmp/state/pki/kubelet-serving.crt", "/tmp/state/pki/kubelet-serving.key")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": "/netfleet-node-3",
		"containerRuntimeEndpoint": "unix:///tmp/state/containerd/containerd.sock",
		"address":                  "10.251.3.2", "readOnlyPort": float64(0), "podLogsDir": "/tmp/state/kubelet/pod-logs",
		"volumePluginDir": "/tmp/state/kubelet/volume-plugins", "imageGCHighThresholdPercent": float64(100),
	} {
		if cfg[k] != want {
			t.Errorf("kubelet config %s = %v, want %v", k, cfg[k], want)
		}
	}
	// Every path the configurations name is in the state directory.
	for _, text := range []string{string(b), n.containerdConfig()} {
		for _, f := range strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(" \n\t\"'=[],", r) }) {
			if strings.HasPrefix(f, "/") && !strings.HasPrefix(f, "/tmp/state/") && f != "/etc/resolv.conf" && !strings.HasPrefix(f, "/netfleet-node-") {
				t.Errorf("a configuration names %s, outside the state directory", f)
			}
		}
	}
}

func TestJoinCgroupScript(t *testing.T) {
	s, err := joinCgroupScript("netfleet-node-9")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if !strings.Contains(s, "echo $$ > "+filepath.Join(h, "netfleet-node-9", "node", "cgroup.procs")) {
			t.Errorf("the script does not join %s: %s", h, s)
		}
	}
	if !strings.HasSuffix(s, `exec "$@"`) {
		t.Errorf("the script does not exec its command: %s", s)
	}
}

// TestSweepIfKilled: the cgroups of a node without its holder are emptied and removed, those of a
// node whose holder runs are left alone.
func TestSweepIfKilled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	if err := checkCgroups(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	pause := filepath.Join(dir, "pause") // a holder is a process named pause
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pause, b, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(name, bin string) *exec.Cmd {
		t.Helper()
		if err := createCgroups(name); err != nil {
			t.Fatal(err)
		}
		join, err := joinCgroupScript(name)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", join, "sh", bin, "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = removeCgroups(name, killTimeout)
		})
		// Its process is in the cgroup, and runs bin, once the prelude has joined it and exec'd:
		// on a loaded machine that can take a while, and the checks below mean nothing before it
		// (a holder is told by its command's name).
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
			if pids, _ := cgroupPids(name); len(pids) > 0 && strings.TrimSpace(string(comm)) == filepath.Base(bin) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the process of %s did not join its cgroup within 30 s", name)
			}
		}
		return cmd
	}
	killed := fmt.Sprintf("netfleet-node-test-killed-%d", os.Getpid())
	held := fmt.Sprintf("netfleet-node-test-held-%d", os.Getpid())
	orphan := start(killed, sleep)
	holder := start(held, pause)

	if swept, err := sweepIfKilled(killed, time.Hour); err != nil || swept {
		t.Errorf("a node younger than the age given was swept (%v, %v)", swept, err)
	}
	if swept, err := sweepIfKilled(held, 0); err != nil || swept {
		t.Errorf("a node with its holder was swept (%v, %v)", swept, err)
	}
	if swept, err := sweepIfKilled(killed, 0); err != nil || !swept {
		t.Fatalf("a node without its holder was not swept (%v, %v)", swept, err)
	}
	if err := orphan.Wait(); err == nil {
		t.Error("the killed node's process exited by itself instead of being killed")
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "freezer", killed)); !os.IsNotExist(err) {
		t.Errorf("the killed node's cgroup is still there: %v", err)
	}
	if pids, _ := cgroupPids(held); len(pids) != 1 || pids[0] != holder.Process.Pid {
		t.Errorf("the held node's cgroup holds %v, want its holder %d", pids, holder.Process.Pid)
	}
}
