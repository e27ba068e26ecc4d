package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one long-running program of the node, its output in <dir>/logs/<name>.log.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once it has exited; err is then set
	err     error
}

// where a process runs.
type placement int

const (
	// onHost runs in the machine's namespaces (the control plane).
	onHost placement = iota
	// inNode runs in the node's network and mount namespaces (containerd, the kubelet,
	// kube-proxy).
	inNode
)

// startProcess starts bin in the node's cgroups, and in its namespaces when where is inNode. It
// dies with this process (SIGKILL when its parent thread goes).
func (n *Node) startProcess(name string, where placement, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(n.layout.logs, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	defer logFile.Close()
	argv := append([]string{bin}, args...)
	if where == inNode {
		argv = append(n.host.enter(), argv...)
	}
	join, err := joinCgroupScript(n.plan.cgroup)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", join, "sh"}, argv...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = n.opts.Dir
	cmd.Env = n.environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.logf("%s started (pid %d), log %s", name, cmd.Process.Pid, logPath)
	return p, nil
}

// environ is the node processes' environment: containerd finds its shim, and the shim runc, on
// PATH.
func (n *Node) environ() []string {
	env := []string{"PATH=" + n.opts.Assets.Containerd + ":" + filepath.Dir(n.opts.Assets.Runc) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return env
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// failure describes how a process that should still run ended, with the end of its log.
func (p *process) failure() error {
	return fmt.Errorf("%s exited (%w); the end of %s:\n%s", p.name, p.err, p.logPath, tail(p.logPath, 15))
}

// stop sends SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run runs a short command to completion within timeout, returning its combined output; an error
// names the command and carries its output.
func run(ctx context.Context, timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s: no answer within %s", strings.Join(argv, " "), timeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// waitFor polls cond every interval until it is true, the process fails, or timeout passes.
func waitFor(ctx context.Context, what string, timeout time.Duration, procs []*process, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		for _, p := range procs {
			if p.exited() {
				return fmt.Errorf("waiting for %s: %w", what, p.failure())
			}
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%s not within %s: %w", what, timeout, last)
			}
			return fmt.Errorf("%s not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// nsInode returns the inode of a process's namespace of the given kind ("net", "mnt").
func nsInode(pid int, kind string) (uint64, error) {
	link, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "ns", kind))
	if err != nil {
		return 0, err
	}
	// e.g. net:[4026532281]
	_, rest, ok := strings.Cut(link, "[")
	if !ok {
		return 0, fmt.Errorf("namespace link %q", link)
	}
	return strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64)
}

var errNotRoot = errors.New("the local node needs root (it makes network and mount namespaces, cgroups and mounts)")
