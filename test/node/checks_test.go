//go:build linux

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// tokenPath is where the ServiceAccount admission plugin mounts a Pod's token.
const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// checkPod checks what a user's cluster would hold a Pod to, from the Pod's status and from its
// containers' processes as the kernel sees them: every container Ready (its readiness probe
// passes) and never restarted (nor by its liveness probe); its process not root, with no capabilities and no way to gain privileges where the
// spec says so; its root filesystem read-only where the spec says so; its ServiceAccount token
// mounted, readable by the process, and not by other users.
func (n *devNode) checkPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	name := pod.Namespace + "/" + pod.Name
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			t.Errorf("%s: Ready %s (%s)", name, c.Status, c.Message)
		}
	}
	if len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		t.Errorf("%s: %d container statuses for %d containers", name, len(pod.Status.ContainerStatuses), len(pod.Spec.Containers))
	}
	for i := range pod.Spec.Containers {
		spec := &pod.Spec.Containers[i]
		var st *corev1.ContainerStatus
		for j := range pod.Status.ContainerStatuses {
			if pod.Status.ContainerStatuses[j].Name == spec.Name {
				st = &pod.Status.ContainerStatuses[j]
			}
		}
		if st == nil {
			t.Errorf("%s: no status for container %s", name, spec.Name)
			continue
		}
		what := name + " container " + spec.Name
		if !st.Ready || st.State.Running == nil {
			t.Errorf("%s: ready %v, state %+v", what, st.Ready, st.State)
		}
		if spec.ReadinessProbe == nil {
			t.Errorf("%s has no readiness probe", what)
		}
		// A failing liveness probe would have restarted it.
		if st.RestartCount != 0 {
			t.Errorf("%s restarted %d times", what, st.RestartCount)
		}
		pid, err := n.taskPID(containerID(*st))
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		status, err := procStatus(pid)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		uid, gid := firstField(status["Uid"]), firstField(status["Gid"])
		if uid == "0" || uid == "" {
			t.Errorf("%s runs as uid %q", what, uid)
		}
		if sc := effectiveRunAsNonRoot(pod, spec); sc && uid == "0" {
			t.Errorf("%s: runAsNonRoot, but uid 0", what)
		}
		if c := spec.SecurityContext; c != nil && c.Capabilities != nil && len(c.Capabilities.Drop) > 0 && c.Capabilities.Drop[0] == "ALL" {
			if eff := status["CapEff"]; strings.Trim(eff, "0") != "" {
				t.Errorf("%s drops ALL capabilities, and has %s", what, eff)
			}
		}
		if c := spec.SecurityContext; c != nil && c.AllowPrivilegeEscalation != nil && !*c.AllowPrivilegeEscalation && status["NoNewPrivs"] != "1" {
			t.Errorf("%s: allowPrivilegeEscalation false, NoNewPrivs %q", what, status["NoNewPrivs"])
		}
		readOnly, err := rootReadOnly(pid)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		wantRO := spec.SecurityContext != nil && spec.SecurityContext.ReadOnlyRootFilesystem != nil && *spec.SecurityContext.ReadOnlyRootFilesystem
		if wantRO && !readOnly {
			t.Errorf("%s: readOnlyRootFilesystem, and its root is mounted read-write", what)
		}
		// The token, as the process sees it.
		token := filepath.Join("/proc", strconv.Itoa(pid), "root", tokenPath)
		fi, err := os.Stat(token)
		if err != nil {
			t.Errorf("%s: no ServiceAccount token: %v", what, err)
			continue
		}
		owner, group := fileOwner(fi)
		perm := fi.Mode().Perm()
		switch {
		case perm&0o007 != 0:
			t.Errorf("%s: its token is mode %o: other users can read it", what, perm)
		case perm&0o400 == 0 || owner != uid && (perm&0o040 == 0 || group != gid):
			t.Errorf("%s: its token (mode %o, %s:%s) is not readable by its process (%s:%s)", what, perm, owner, group, uid, gid)
		}
		t.Logf("%s: pid %d uid %s gid %s CapEff %s NoNewPrivs %s, root read-only %v, token %o %s:%s",
			what, pid, uid, gid, status["CapEff"], status["NoNewPrivs"], readOnly, perm, owner, group)
	}
}

func effectiveRunAsNonRoot(pod *corev1.Pod, c *corev1.Container) bool {
	if c.SecurityContext != nil && c.SecurityContext.RunAsNonRoot != nil {
		return *c.SecurityContext.RunAsNonRoot
	}
	return pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsNonRoot != nil && *pod.Spec.SecurityContext.RunAsNonRoot
}

// procStatus reads /proc/<pid>/status.
func procStatus(pid int) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// rootReadOnly reports whether a process's root is mounted read-only, from its mountinfo.
func rootReadOnly(pid int) (bool, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			for _, o := range strings.Split(f[5], ",") {
				if o == "ro" {
					return true, nil
				}
			}
			return false, nil
		}
	}
	return false, fmt.Errorf("no root mount in the mountinfo of %d", pid)
}
