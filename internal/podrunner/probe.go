package podrunner

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type probeKind int

const (
	startupProbe probeKind = iota
	readinessProbe
	livenessProbe
	probeKinds
)

func (k probeKind) String() string {
	return [...]string{"startup", "readiness", "liveness"}[k]
}

// probeSpec returns the container's probe of kind k, nil when it has none.
func probeSpec(c *corev1.Container, k probeKind) *corev1.Probe {
	return [...]*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe}[k]
}

// probeResult is one probe's outcome, sent to the Pod's worker.
type probeResult struct {
	container int
	attempt   int
	kind      probeKind
	ok        bool
	msg       string
}

// target is where a container's probes go.
type target struct {
	addr  netip.Addr
	ports []corev1.ContainerPort
	moved map[int32]int32
}

// port resolves a probe's port: a number or a container port name, moved to its host port where
// the runner serves it there.
func (t target) port(p intstr.IntOrString) (int32, error) {
	n := p.IntVal
	if p.Type == intstr.String {
		n = -1
		for _, cp := range t.ports {
			if cp.Name == p.StrVal {
				n = cp.ContainerPort
				break
			}
		}
		if n < 0 {
			if v, err := strconv.ParseInt(p.StrVal, 10, 32); err == nil {
				n = int32(v)
			} else {
				return 0, fmt.Errorf("no container port named %q", p.StrVal)
			}
		}
	}
	if hp, ok := t.moved[n]; ok {
		n = hp
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d out of range", n)
	}
	return n, nil
}

// probeLoop runs one probe of a container run until stop closes, sending every result.
func probeLoop(ctx context.Context, spec *corev1.Probe, period time.Duration, t target, send func(ok bool, msg string) bool, stop <-chan struct{}) {
	wait := time.Duration(spec.InitialDelaySeconds) * time.Second
	timeout := time.Duration(max(spec.TimeoutSeconds, 1)) * time.Second
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		ok, msg := probeOnce(ctx, spec, t, timeout)
		if !send(ok, msg) {
			return
		}
		wait = period
	}
}

// probePeriod is the probe's period; readiness probes are capped at maxReadiness.
func probePeriod(spec *corev1.Probe, k probeKind, maxReadiness time.Duration) time.Duration {
	p := time.Duration(spec.PeriodSeconds) * time.Second
	if p <= 0 {
		p = 10 * time.Second
	}
	if k == readinessProbe {
		p = min(p, maxReadiness)
	}
	return p
}

func probeOnce(ctx context.Context, spec *corev1.Probe, t target, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case spec.HTTPGet != nil:
		return probeHTTP(ctx, spec.HTTPGet, t)
	case spec.TCPSocket != nil:
		port, err := t.port(spec.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		host := spec.TCPSocket.Host
		if host == "" {
			host = t.addr.String()
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		return true, ""
	default:
		// Admission refuses the other handlers (see unsupported).
		return false, "unsupported probe handler"
	}
}

func probeHTTP(ctx context.Context, h *corev1.HTTPGetAction, t target) (bool, string) {
	port, err := t.port(h.Port)
	if err != nil {
		return false, err.Error()
	}
	host := h.Host
	if host == "" {
		host = t.addr.String()
	}
	scheme := strings.ToLower(string(h.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := scheme + "://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/netfleet-podrunner")
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
		} else {
			req.Header.Add(hd.Name, hd.Value)
		}
	}
	// A fresh connection per probe, like the kubelet, and no certificate checks, like the kubelet.
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // probes do not verify certificates
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return false, err.Error()
	}
	_ = resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return true, ""
}
