package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/internal/testbin"
)

const testDeadline = 30 * time.Second

// TestSIGTERM builds and runs the binary, connects a client, and sends SIGTERM: the client is
// disconnected with 1001 and the process exits 0.
func TestSIGTERM(t *testing.T) {
	// The package's directory is cmd/gameserver, two below the repository root.
	bins, err := testbin.Build(filepath.Join("..", ".."), t.TempDir(), nil, "./cmd/gameserver")
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	bin := bins["./cmd/gameserver"]
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--game-port", "0", "--admin-port", "0",
		"--world-population", "50", "--world-half-extent", "200", "--ready-without-push")
	cmd.Env = []string{netcode.EnvAdminToken + "=test-token"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	records := make(chan map[string]any, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				records <- rec
			}
			if strings.Contains(sc.Text(), "test-token") {
				t.Errorf("the admin token was logged: %s", sc.Text())
			}
		}
		close(records)
		exited <- cmd.Wait()
	}()

	var gameAddr, adminAddr string
	deadline := time.After(testDeadline)
	for gameAddr == "" || adminAddr == "" {
		select {
		case rec, ok := <-records:
			if !ok {
				t.Fatal("the server exited before it ran")
			}
			switch rec["msg"] {
			case "game server running":
				gameAddr, _ = rec["address"].(string)
			case "admin API listening":
				adminAddr, _ = rec["address"].(string)
			}
		case <-deadline:
			t.Fatal("the server did not report its addresses")
		}
	}
	go func() {
		for range records {
		}
	}()

	h, err := enet.NewHost(enet.Config{Peers: 1, Channels: broadcast.Channels})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy()
	peer, err := h.Connect(netip.MustParseAddrPort(gameAddr), broadcast.Channels, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New()
	var ev enet.Event
	var signalled bool
	var code uint32
	var buf []byte
	end := time.Now().Add(testDeadline)
	for code == 0 {
		if time.Now().After(end) {
			t.Fatal("no disconnect from the server")
		}
		ok, err := h.Service(&ev, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			switch ev.Type {
			case enet.EventConnect:
				_ = peer.Send(broadcast.ChannelReliable, cl.AppendHello(nil), enet.Reliable)
			case enet.EventReceive:
				if err := cl.HandleMessage(ev.Packet.Bytes(), time.Now().UnixMilli()); err != nil {
					t.Fatalf("client: %v", err)
				}
			case enet.EventDisconnect:
				code = ev.Data
			}
		}
		now := time.Now().UnixMilli()
		if cl.AckDue() {
			buf, _ = cl.AppendAck(buf[:0])
			_ = peer.Send(broadcast.ChannelSnapshot, buf, enet.Unreliable)
		}
		if cl.PingDue(now) && peer.State() == enet.StateConnected {
			_ = peer.Send(broadcast.ChannelSnapshot, cl.AppendPing(buf[:0], now), enet.Unreliable)
		}
		if !signalled && cl.Stats().Packets > 0 {
			checkAdmin(t, adminAddr)
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	if !signalled || code != protocol.CloseGoingAway {
		t.Fatalf("disconnect data %d (signalled %v), want %d", code, signalled, protocol.CloseGoingAway)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(testDeadline):
		t.Fatal("the server did not exit")
	}
}

// checkAdmin checks the admin API of the running server: ready, one peer, the tick metrics.
func checkAdmin(t *testing.T, addr string) {
	t.Helper()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if code, body := get(netcode.PathReadyz); code != http.StatusOK {
		t.Errorf("readyz %d: %s", code, body)
	}
	code, body := get(netcode.PathPeers)
	var peers netcode.PeersResponse
	if code != http.StatusOK || json.Unmarshal([]byte(body), &peers) != nil || len(peers.Peers) != 1 {
		t.Errorf("peers %d: %s", code, body)
	}
	_, body = get(netcode.PathMetrics)
	for _, m := range []string{"netfleet_gameserver_tick_duration_seconds_bucket", "netfleet_gameserver_connected_peers 1"} {
		if !strings.Contains(body, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
}
