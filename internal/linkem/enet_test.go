package linkem

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// enetScript runs an ENet server and an ENet client (Debian's python3-enet, an implementation
// independent of netfleet) in one process. It prints the server's port, reads the port to connect
// the client to, sends a reliable 100-byte packet every 20 ms for argv[1] seconds, has the server
// echo each one reliably, and prints what the client's peer measured.
const enetScript = `
import enet, json, sys, time
server = enet.Host(enet.Address(b"127.0.0.1", 0), 4, 1, 0, 0)
print(server.address.port, flush=True)
port = int(sys.stdin.readline())
client = enet.Host(None, 1, 1, 0, 0)
peer = client.connect(enet.Address(b"127.0.0.1", port), 1)
connected, echoes, sent, peers = False, 0, 0, set()
deadline = time.time() + float(sys.argv[1])
next_send = time.time()
while time.time() < deadline:
    for h in (server, client):
        ev = h.service(1)
        while ev is not None and ev.type != enet.EVENT_TYPE_NONE:
            if h is server:
                peers.add(str(ev.peer.address))
                if ev.type == enet.EVENT_TYPE_RECEIVE:
                    ev.peer.send(0, enet.Packet(ev.packet.data, enet.PACKET_FLAG_RELIABLE))
            elif ev.type == enet.EVENT_TYPE_CONNECT:
                connected = True
            elif ev.type == enet.EVENT_TYPE_RECEIVE:
                echoes += 1
            ev = h.check_events()
    if connected and time.time() >= next_send:
        peer.send(0, enet.Packet(b"x" * 100, enet.PACKET_FLAG_RELIABLE))
        sent += 1
        next_send += 0.02
print(json.dumps({"connected": connected, "sent": sent, "echoes": echoes,
                  "rttMs": peer.roundTripTime, "serverPeers": sorted(peers)}), flush=True)
`

const enetPython = "/usr/bin/python3"

// Real ENet through the proxy: the handshake and reliable traffic survive 5% downstream loss,
// ENet's own RTT shows the emulated delay, and the server sees the proxy's per-client socket.
func TestENetThroughProxy(t *testing.T) {
	if err := exec.Command(enetPython, "-c", "import enet").Run(); err != nil {
		t.Skipf("no python3-enet (%v): install it with hack/install-deps.sh", err)
	}
	script := filepath.Join(t.TempDir(), "enet_echo.py")
	if err := os.WriteFile(script, []byte(enetScript), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, enetPython, script, "3")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("no server port from the ENet script: %v %s", cmd.Wait(), stderr.String())
	}
	serverPort, err := strconv.Atoi(strings.TrimSpace(lines.Text()))
	if err != nil {
		t.Fatal(err)
	}

	p, err := New(Config{
		Listen: "127.0.0.1:0", Upstream: fmt.Sprintf("127.0.0.1:%d", serverPort), Seed: 5,
		Default: Profile{Down: Impairment{DelayMs: 40, Loss: 0.05}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := fmt.Fprintln(stdin, p.Addr().Port()); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatalf("no result from the ENet script: %v %s", cmd.Wait(), stderr.String())
	}
	var res struct {
		Connected   bool     `json:"connected"`
		Sent        int      `json:"sent"`
		Echoes      int      `json:"echoes"`
		RTTMs       int      `json:"rttMs"`
		ServerPeers []string `json:"serverPeers"`
	}
	if err := json.Unmarshal(lines.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ENet script: %v %s", err, stderr.String())
	}
	st := p.Stats()
	t.Logf("ENet: %+v; proxy down: %d in, %d lost", res, st.Clients[0].Down.PacketsIn, st.Clients[0].Down.DroppedLoss)
	if !res.Connected || res.Sent < 50 || res.Echoes < res.Sent*3/4 {
		t.Errorf("ENet session: %+v, want connected with most reliable echoes back", res)
	}
	// ENet's RTT is a smoothed mean of its acknowledged round trips; retransmissions after loss
	// lengthen some of them.
	if res.RTTMs < 40 || res.RTTMs > 150 {
		t.Errorf("ENet RTT %d ms, want the 40 ms emulated delay plus a little", res.RTTMs)
	}
	if len(st.Clients) != 1 || len(res.ServerPeers) != 1 || res.ServerPeers[0] != st.Clients[0].Upstream.String() {
		t.Errorf("server saw %v, proxy has %+v", res.ServerPeers, st.Clients)
	}
	if st.Clients[0].Down.DroppedLoss == 0 {
		t.Error("no downstream loss was applied")
	}
}
