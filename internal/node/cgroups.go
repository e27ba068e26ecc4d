package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is /sys/fs/cgroup; the node keeps every process it starts, and the kubelet every
// Pod, in a cgroup of its own below it in every hierarchy, so that stopping the node can find
// and kill all of them and leave no cgroup behind.
const cgroupRoot = "/sys/fs/cgroup"

// requiredControllers are the cgroup v1 controllers the kubelet and runc need.
var requiredControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "pids", "blkio"}

// cgroupHierarchies returns the mount points of the mounted cgroup hierarchies (v1, and the v2
// one of a hybrid layout), read from /proc/self/mountinfo.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		i := slices.Index(fields, "-")
		if i < 0 || i+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if t := fields[i+1]; (t == "cgroup" || t == "cgroup2") && strings.HasPrefix(fields[4], cgroupRoot+"/") {
			out = append(out, fields[4])
		}
	}
	return out, sc.Err()
}

// checkCgroups reports a machine whose cgroups the node cannot run on: it needs the cgroup v1
// hierarchy with the controllers the kubelet uses.
func checkCgroups() error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(cgroupRoot, &st); err != nil {
		return fmt.Errorf("cgroups: %s: %w", cgroupRoot, err)
	}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		return errors.New("cgroups: this machine has only the unified cgroup v2 hierarchy; the local node runs on the cgroup v1 hierarchy (boot with systemd.unified_cgroup_hierarchy=0)")
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	var missing []string
	for _, c := range requiredControllers {
		if !slices.Contains(hs, filepath.Join(cgroupRoot, c)) && !mountedWith(hs, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroups: the controllers %v are not mounted under %s (mounted: %v)", missing, cgroupRoot, hs)
	}
	return nil
}

// mountedWith reports a co-mounted controller (e.g. /sys/fs/cgroup/cpu,cpuacct).
func mountedWith(hs []string, c string) bool {
	for _, h := range hs {
		if slices.Contains(strings.Split(filepath.Base(h), ","), c) {
			return true
		}
	}
	return false
}

// createCgroups makes <hierarchy>/<name> and <hierarchy>/<name>/node in every hierarchy, cpuset's
// given the parent's CPUs and memory nodes (a v1 cpuset cgroup takes no task without them).
func createCgroups(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		for _, d := range []string{filepath.Join(h, name), filepath.Join(h, name, "node")} {
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("cgroup %s: %w", d, err)
			}
			if !strings.Contains(filepath.Base(h), "cpuset") {
				continue
			}
			for _, knob := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(d), knob))
				if err != nil {
					return fmt.Errorf("cgroup %s: %w", d, err)
				}
				if err := os.WriteFile(filepath.Join(d, knob), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %s: %w", d, knob, err)
				}
			}
		}
	}
	return nil
}

// joinCgroupScript is a shell prelude that moves the shell into the node's cgroup of every
// hierarchy before it execs the command, so the command and all it forks are in it from their
// first instruction.
func joinCgroupScript(name string) (string, error) {
	hs, err := cgroupHierarchies()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "echo $$ > %s && ", filepath.Join(h, name, "node", "cgroup.procs"))
	}
	b.WriteString(`exec "$@"`)
	return b.String(), nil
}

// cgroupPids returns the processes in <freezer>/<name> and below.
func cgroupPids(name string) ([]int, error) {
	var pids []int
	root := filepath.Join(cgroupRoot, "freezer", name)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// killCgroups kills every process in the node's cgroups: it freezes them (so none forks or exits
// under the killing), sends SIGKILL to each, thaws them, and waits until the cgroups are empty.
func killCgroups(name string, timeout time.Duration) error {
	state := filepath.Join(cgroupRoot, "freezer", name, "freezer.state")
	if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		pids, err := cgroupPids(name)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in cgroup %s after SIGKILL", pids, name)
		}
		_ = os.WriteFile(state, []byte("FROZEN"), 0o644)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.WriteFile(state, []byte("THAWED"), 0o644)
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroups removes <hierarchy>/<name> and everything below it in every hierarchy, deepest
// first. A cgroup whose last process has just been killed may be busy for a moment.
func removeCgroups(name string, timeout time.Duration) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, name)
		for {
			err := removeTree(root)
			if err == nil || time.Now().After(deadline) {
				errs = append(errs, err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

func removeTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return fs.SkipDir
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// staleAge is how old a node's cgroup must be before a node without its holder is taken for
// killed: a node that is starting makes its cgroups a moment before its holder.
const staleAge = 10 * time.Second

// sweepKilled removes what nodes whose netfleet-dev was killed (SIGKILL, a second Ctrl-C) left:
// a node's cgroups with no holder in them still hold its containers, their shims, etcd and
// kube-apiserver; killing them lets the kernel drop the node's namespaces, with its mounts, link
// and iptables rules, and the cgroups are removed. Its state directory stays.
func sweepKilled(logf func(string, ...any)) error {
	entries, err := os.ReadDir(filepath.Join(cgroupRoot, "freezer"))
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "netfleet-node-") {
			continue
		}
		swept, err := sweepIfKilled(e.Name(), staleAge)
		if err != nil {
			return err
		}
		if swept && logf != nil {
			logf("removed the remains of a node that was killed: cgroup %s", e.Name())
		}
	}
	return nil
}

// sweepIfKilled kills and removes the node cgroup name if it is at least minAge old and has no
// holder; it reports whether it did.
func sweepIfKilled(name string, minAge time.Duration) (bool, error) {
	info, err := os.Stat(filepath.Join(cgroupRoot, "freezer", name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if time.Since(info.ModTime()) < minAge {
		return false, nil
	}
	held, err := hasHolder(name)
	if errors.Is(err, fs.ErrNotExist) {
		// A node cgroup without its node part was not made by a node start that got far.
		return false, nil
	}
	if err != nil || held {
		return false, err
	}
	if err := killCgroups(name, killTimeout); err != nil {
		return false, err
	}
	return true, removeCgroups(name, killTimeout)
}

// hasHolder reports whether the node of cgroup name has its namespace holder, a pause process in
// its node cgroup.
func hasHolder(name string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(cgroupRoot, "freezer", name, "node", "cgroup.procs"))
	if err != nil {
		return false, err
	}
	for _, f := range strings.Fields(string(b)) {
		if c, err := os.ReadFile(filepath.Join("/proc", f, "comm")); err == nil && strings.TrimSpace(string(c)) == "pause" {
			return true, nil
		}
	}
	return false, nil
}

// adoptChildren moves this process's children of the given names (etcd and kube-apiserver,
// which envtest starts) into the node's cgroups, so a sweep of a killed node finds them too.
func adoptChildren(name string, comms ...string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	self := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		lp, rp := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if lp < 0 || rp < lp {
			continue
		}
		fields := strings.Fields(string(stat[rp+1:]))
		if len(fields) < 2 || fields[1] != self || !slices.Contains(comms, string(stat[lp+1:rp])) {
			continue
		}
		for _, h := range hs {
			if err := os.WriteFile(filepath.Join(h, name, "node", "cgroup.procs"), []byte(p.Name()), 0o644); err != nil {
				return fmt.Errorf("move %s (pid %s) into cgroup %s: %w", stat[lp+1:rp], p.Name(), h, err)
			}
		}
	}
	return nil
}
