package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// commandTimeout bounds every short command (ip, mount, iptables, ctr): a kernel or tool that
// does not answer fails the start instead of hanging it.
const commandTimeout = 20 * time.Second

// kernelTunables are the sysctls the kubelet sets at start (vm.overcommit_memory=1,
// kernel.panic=10, ...). They are not per network namespace, so the node's processes see them
// as files of the state directory instead: the kubelet sets them there and the machine's
// settings stay as they are.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// host is the node's place on the machine: a network namespace and a mount namespace, held by a
// pause process in them, joined to the machine by a veth pair. In the mount namespace the
// machine's /etc, /opt, /run, /usr and /var are overlays whose writes land in the state
// directory, and every mount the node makes (container root filesystems, volumes, network
// namespaces) is invisible to the machine and goes away with the namespace.
type host struct {
	holder         *exec.Cmd
	done           chan struct{}
	netNS, mountNS uint64
}

// enter returns the command prefix that runs a program in the node's namespaces.
func (h *host) enter() []string {
	return []string{"nsenter", "--target", strconv.Itoa(h.holder.Process.Pid), "--mount", "--net", "--"}
}

// inNode runs a short command in the node's namespaces.
func (n *Node) inNode(ctx context.Context, argv ...string) (string, error) {
	return run(ctx, commandTimeout, append(n.host.enter(), argv...)...)
}

// setUpHost makes the node's namespaces, overlays and link.
func (n *Node) setUpHost(ctx context.Context) error {
	join, err := joinCgroupScript(n.plan.cgroup)
	if err != nil {
		return err
	}
	// unshare execs pause in the new namespaces; the holder's pid is the namespaces' handle, and
	// its being alive tells a node that runs from one whose netfleet-dev was killed.
	holder := exec.Command("/bin/sh", "-c", join, "sh", "unshare", "--mount", "--net", "--propagation", "private", "--", n.opts.Assets.Pause)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		return fmt.Errorf("start the node's namespace holder: %w", err)
	}
	h := &host{holder: holder, done: make(chan struct{})}
	go func() {
		_ = holder.Wait()
		close(h.done)
	}()
	n.host = h
	pid := holder.Process.Pid
	ownNet, err := nsInode(os.Getpid(), "net")
	if err != nil {
		return err
	}
	ownMnt, err := nsInode(os.Getpid(), "mnt")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(commandTimeout)
	for {
		netNS, err1 := nsInode(pid, "net")
		mntNS, err2 := nsInode(pid, "mnt")
		if err1 == nil && err2 == nil && netNS != ownNet && mntNS != ownMnt {
			h.netNS, h.mountNS = netNS, mntNS
			break
		}
		select {
		case <-h.done:
			return fmt.Errorf("unshare --mount --net failed: the kernel refused new namespaces (is this root, and are network namespaces enabled?)")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node's namespaces did not appear within %s", commandTimeout)
		}
	}

	// Overlays over the machine's directories, writes into the state directory.
	for _, d := range overlaid {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		upper, work := filepath.Join(n.layout.overlays, d, "upper"), filepath.Join(n.layout.overlays, d, "work")
		for _, p := range []string{upper, work} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		}
		if _, err := n.inNode(ctx, "mount", "-t", "overlay", "overlay", "-o",
			"lowerdir="+d+",upperdir="+upper+",workdir="+work, d); err != nil {
			return fmt.Errorf("overlay %s (does the kernel have overlayfs?): %w", d, err)
		}
	}
	for _, t := range kernelTunables {
		live := filepath.Join("/proc/sys", t)
		v, err := os.ReadFile(live)
		if err != nil {
			return fmt.Errorf("read %s: %w", live, err)
		}
		f := filepath.Join(n.layout.sysctls, strings.ReplaceAll(t, "/", "."))
		if err := os.WriteFile(f, v, 0o644); err != nil {
			return err
		}
		if _, err := n.inNode(ctx, "mount", "--bind", f, live); err != nil {
			return fmt.Errorf("shadow %s: %w", live, err)
		}
	}

	// The link: the machine's end gets the host address, the node's end (eth0) the node's.
	p := n.plan
	steps := [][]string{
		{"ip", "link", "add", p.hostLink, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)},
		{"ip", "addr", "add", p.hostIP.String() + "/30", "dev", p.hostLink},
		{"ip", "link", "set", p.hostLink, "up"},
	}
	for _, s := range steps {
		if _, err := run(ctx, commandTimeout, s...); err != nil {
			return fmt.Errorf("node link (does the kernel have veth?): %w", err)
		}
	}
	for _, s := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", p.nodeIP.String() + "/30", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
	} {
		if _, err := n.inNode(ctx, s...); err != nil {
			return fmt.Errorf("node link: %w", err)
		}
	}
	// The Pods' replies to the machine (the API server, the tests) go back through the node.
	if _, err := run(ctx, commandTimeout, "ip", "route", "add", p.podCIDR.String(), "via", p.nodeIP.String(), "dev", p.hostLink); err != nil {
		return fmt.Errorf("route to the Pods: %w", err)
	}
	// kube-proxy and the portmap plugin need iptables' nat table.
	if _, err := n.inNode(ctx, "iptables", "-t", "nat", "-S"); err != nil {
		return fmt.Errorf("iptables' nat table does not work in the node's network namespace (kube-proxy and hostPorts need it): %w", err)
	}
	return nil
}

// stopHost kills the holder: with every other process of the node gone, the kernel drops the
// namespaces, and with the network namespace the node's end of the veth pair (and so the machine's
// end and its route), the bridge, and every iptables rule of the node. The kernel tears a dropped
// network namespace down later, on a work queue, so the machine's end of the pair can outlive the
// holder for a moment: it is deleted here (which takes the route with it), and a link already gone
// is not an error.
func (n *Node) stopHost() {
	if n.host == nil {
		return
	}
	_ = n.host.holder.Process.Kill()
	<-n.host.done
	_, _ = run(context.Background(), commandTimeout, "ip", "link", "del", n.plan.hostLink)
}
