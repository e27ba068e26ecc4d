package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is an io.Writer the test can read while run writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunRelaysAndPrintsTable(t *testing.T) {
	server, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	go func() { // echo
		buf := make([]byte, 2048)
		for {
			n, from, err := server.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if _, err := server.WriteToUDPAddrPort(buf[:n], from); err != nil {
				return
			}
		}
	}()
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("steps:\n- {at: 0s, select: client:0, profile: {up: {duplicate: 1}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "profile.json")
	if err := os.WriteFile(prof, []byte(`{"delayMs": 5}`), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--listen", "127.0.0.1:0", "--upstream", server.LocalAddr().String(), "--seed", "9",
			"--profile", "@" + prof, "--schedule", plan, "--control", "127.0.0.1:0", "--stats-interval", "50ms", "--realtime=" + strconv.FormatBool(os.Geteuid() == 0),
		}, &stdout, &stderr)
	}()
	addrRE := regexp.MustCompile(`listening on (\S+),`)
	eventually(t, "the listening line", func() bool { return addrRE.MatchString(stdout.String()) })
	if !strings.Contains(stdout.String(), "control http://127.0.0.1:") {
		t.Errorf("no control address in %q", stdout.String())
	}
	proxy, err := net.ResolveUDPAddr("udp", addrRE.FindStringSubmatch(stdout.String())[1])
	if err != nil {
		t.Fatal(err)
	}
	cl, err := net.DialUDP("udp", nil, proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	// Duplicated upstream, so two echoes come back.
	buf := make([]byte, 64)
	for i := range 2 {
		if err := cl.SetReadDeadline(time.Now().Add(15 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := cl.Read(buf)
		if err != nil || string(buf[:n]) != "hello" {
			t.Fatalf("echo %d: %q, %v", i, buf[:n], err)
		}
	}
	eventually(t, "a stats line", func() bool { return strings.Contains(stdout.String(), "up: in 1 out 2") })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	out := stdout.String()
	for _, want := range []string{"CLIENT", "QDELAY-P95", "client:0", "release lateness over 4 packets"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^\s+0\s+127\.0\.0\.1:\d+\s+127\.0\.0\.1:\d+\s+client:0\s+up\s+1\s+2\s`).MatchString(out) {
		t.Errorf("no upstream row for client 0:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "client mapped") {
		t.Errorf("no mapping log in %q", stderr.String())
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"extra argument", []string{"extra"}, "unexpected arguments"},
		{"bad profile", []string{"--profile", `{"loss": 7}`}, "--profile: down.loss"},
		{"missing profile file", []string{"--profile", "@/nonexistent"}, "--profile: read profile"},
		{"missing schedule", []string{"--schedule", "/nonexistent.yaml"}, "--schedule"},
		{"public control", []string{"--listen", "127.0.0.1:0", "--control", "0.0.0.0:0"}, "loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut syncBuffer
			err := run(context.Background(), tt.args, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want one containing %q", err, tt.msg)
			}
		})
	}
	if err := run(context.Background(), []string{"--help"}, &syncBuffer{}, &syncBuffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}
