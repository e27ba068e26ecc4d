package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Marks identify what one node puts on the machine: its state directory, its cgroup, the machine's
// end of its link and the route to its Pods, and its namespaces.
type Marks struct {
	Dir      string       `json:"dir"`
	Cgroup   string       `json:"cgroup"`
	HostLink string       `json:"hostLink"`
	PodCIDR  netip.Prefix `json:"podCIDR"`
	NetNS    uint64       `json:"netNS"`
	MountNS  uint64       `json:"mountNS"`
}

// Leftovers lists what of the node marked m is on the machine: processes in its namespaces or
// cgroups or running from its state directory, mounts of the machine under the state directory
// or of its namespaces, its link, its route, its cgroups. A node that has stopped leaves none.
func Leftovers(m Marks) ([]string, error) {
	var found []string
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if why := processMark(pid, m); why != "" {
			found = append(found, fmt.Sprintf("process %d (%s): %s", pid, comm(pid), why))
		}
	}

	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	nsNames := []string{fmt.Sprintf("net:[%d]", m.NetNS), fmt.Sprintf("mnt:[%d]", m.MountNS)}
	sc := bufio.NewScanner(bytes.NewReader(mounts))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		under := f[4] == m.Dir || strings.HasPrefix(f[4], m.Dir+"/")
		ns := (m.NetNS != 0 && strings.Contains(line, nsNames[0])) || (m.MountNS != 0 && strings.Contains(line, nsNames[1]))
		if under || ns || strings.Contains(line, m.Dir+"/") {
			found = append(found, "mount: "+line)
		}
	}

	if m.HostLink != "" {
		if _, err := os.Lstat(filepath.Join("/sys/class/net", m.HostLink)); err == nil {
			found = append(found, "network interface "+m.HostLink)
		}
	}
	if m.PodCIDR.IsValid() {
		routed, err := routes(m.PodCIDR)
		if err != nil {
			return nil, err
		}
		found = append(found, routed...)
	}
	if m.Cgroup != "" {
		hs, err := cgroupHierarchies()
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			if _, err := os.Stat(filepath.Join(h, m.Cgroup)); err == nil {
				found = append(found, "cgroup "+filepath.Join(h, m.Cgroup))
			}
		}
	}
	return found, nil
}

// processMark says why a process belongs to the node marked m, or "".
func processMark(pid int, m Marks) string {
	for kind, want := range map[string]uint64{"net": m.NetNS, "mnt": m.MountNS} {
		if want == 0 {
			continue
		}
		if ino, err := nsInode(pid, kind); err == nil && ino == want {
			return "in the node's " + kind + " namespace"
		}
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if m.Cgroup != "" {
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil && bytes.Contains(b, []byte("/"+m.Cgroup+"/")) {
			return "in the node's cgroup"
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && bytes.Contains(b, []byte(m.Dir+"/")) {
		return "its command line names the state directory"
	}
	return ""
}

func comm(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// routes lists the machine's IPv4 routes to destinations in p (from /proc/net/route).
func routes(p netip.Prefix) ([]string, error) {
	b, err := os.ReadFile("/proc/net/route")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		// /proc/net/route holds addresses in host (little-endian) byte order.
		a := netip.AddrFrom4([4]byte{byte(dst), byte(dst >> 8), byte(dst >> 16), byte(dst >> 24)})
		bits := 0
		for m := uint32(mask); m != 0; m >>= 1 {
			bits += int(m & 1)
		}
		if bits > 0 && p.Overlaps(netip.PrefixFrom(a, bits)) {
			out = append(out, fmt.Sprintf("route to %s/%d via %s", a, bits, f[0]))
		}
	}
	return out, nil
}
