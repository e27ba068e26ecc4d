//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// child is a process the tests started.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped; err is then set
	err  error
}

// spawn starts cmd in a process group of its own that the kernel kills if the test binary dies.
// The parent-death signal fires when the OS thread that forked the child ends, and the Go runtime
// ends a thread when a goroutine locked to it returns (linkem's release loop does): so the child
// is forked from a goroutine that keeps its own thread until the child has exited.
func spawn(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &child{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signalGroup signals the child's process group and waits up to wait for it to exit; it reports
// whether it did.
func (c *child) signalGroup(sig syscall.Signal, wait time.Duration) (bool, error) {
	if err := syscall.Kill(-c.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("signal %d: %w", c.pid(), err)
	}
	select {
	case <-c.done:
		return true, nil
	case <-time.After(wait):
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL after grace.
func (c *child) stop(grace time.Duration) error {
	if c.exited() {
		return nil
	}
	gone, err := c.signalGroup(syscall.SIGTERM, grace)
	if err != nil || gone {
		return err
	}
	if _, err := c.signalGroup(syscall.SIGKILL, waitLimit); err != nil {
		return err
	}
	return nil
}

// lockedFile is a log file written line by line from several goroutines.
type lockedFile struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) (*lockedFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return &lockedFile{f: f}, nil
}

func (l *lockedFile) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.f, "%s %s\n", time.Now().Format("15:04:05.000"), s)
}

func (l *lockedFile) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// freeAddrs returns n distinct loopback TCP addresses that were free a moment ago: it holds
// each port until it has them all, so two of them cannot be the same port.
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// randomPort is a port in [lo, lo+n) for listeners on the Pods' own loopback addresses.
func randomPort(lo, n int) int32 { return int32(lo + rand.IntN(n)) }

// rssBytes is the resident set size of a process, from /proc.
func rssBytes(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("rss of %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rss of %d: %q: %w", pid, rest, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("rss of %d: no VmRSS line", pid)
}

// alive reports whether pid is a live process; a zombie counts as gone.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// metricSamples scrapes a Prometheus endpoint and returns every sample of the named gauges and
// counters, keyed by name and then by the label set rendered as k=v pairs ("" without labels).
func metricSamples(url string, names ...string) (map[string]map[string]float64, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	out := map[string]map[string]float64{}
	for _, name := range names {
		fam, ok := families[name]
		if !ok {
			continue
		}
		out[name] = map[string]float64{}
		for _, m := range fam.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[name][strings.Join(labels, ",")] = v
		}
	}
	return out, nil
}
