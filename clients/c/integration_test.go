package cclient

import (
	"bufio"
	"context"
	"encoding/json"

	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/examples/arena"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/serve"
)

// testDeadline bounds every wait: a hang guard for a loaded machine, not a speed assertion.
const testDeadline = 45 * time.Second

var buildOnce = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("make", "--no-print-directory", "lib", "bot").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("make lib bot: %w\n%s", err, out)
	}
	return filepath.Abs("build/nfbot")
})

// arenaSpec is the arena command's (examples/arena/cmd/arena).
func arenaSpec() serve.Spec {
	return serve.Spec{
		Name: "arena",
		New: func(s serve.Setup) (game.Game, *entity.Store, error) {
			g, err := arena.New(arena.Config{MaxPlayers: s.MaxPeers})
			if err != nil {
				return nil, nil, err
			}
			return g, g.Store(), nil
		},
		InterestRadius: 150,
	}
}

// freePorts returns a free UDP port and a free TCP port on loopback.
func freePorts(t *testing.T) (game, admin int) {
	t.Helper()
	u, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	game, admin = u.LocalAddr().(*net.UDPAddr).Port, l.Addr().(*net.TCPAddr).Port
	_ = u.Close()
	_ = l.Close()
	return game, admin
}

// server is an arena game server run by gameserver/serve, as its command runs it.
type server struct {
	game  netip.AddrPort
	admin string
}

func startArena(t *testing.T) server {
	t.Helper()
	return startArenaEnv(t, func(string) (string, bool) { return "", false })
}

// startArenaEnv starts the arena server with the environment getenv.
func startArenaEnv(t *testing.T, getenv func(string) (string, bool)) server {
	t.Helper()
	gp, ap := freePorts(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args := []string{"--bind", "127.0.0.1", "--game-port", strconv.Itoa(gp), "--admin-port", strconv.Itoa(ap),
		"--ready-without-push", "--log-level", "warn", "--max-peers", "16"}
	go func() {
		done <- serve.Run(ctx, arenaSpec(), args, getenv, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("arena server: %v", err)
		}
	})
	s := server{game: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(gp)), admin: fmt.Sprintf("http://127.0.0.1:%d", ap)}
	deadline := time.Now().Add(testDeadline)
	for {
		resp, err := http.Get(s.admin + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case err := <-done:
			t.Fatalf("arena server stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("arena server not ready within %s", testDeadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s server) peers(t *testing.T) netcode.PeersResponse {
	t.Helper()
	resp, err := http.Get(s.admin + netcode.PathPeers)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var p netcode.PeersResponse
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeSchema writes the arena's schema JSON as its command's --write-schema does.
func writeSchema(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "arena-schema.json")
	if err := serve.Run(context.Background(), arenaSpec(), []string{"--write-schema", path},
		func(string) (string, bool) { return "", false }, io.Discard); err != nil {
		t.Fatal(err)
	}
	return path
}

// viewEntity is one entity of a view, as the C bot writes it and as the Go client holds it.
type viewEntity struct {
	ID     uint16   `json:"id"`
	Kind   uint8    `json:"kind"`
	Pos    [3]int32 `json:"pos"`
	Rot    uint32   `json:"rot"`
	Vel    [3]int32 `json:"vel"`
	Fields []uint32 `json:"fields"`
}

func (e viewEntity) equal(o viewEntity) bool {
	return e.ID == o.ID && e.Kind == o.Kind && e.Pos == o.Pos && e.Rot == o.Rot && e.Vel == o.Vel &&
		slices.Equal(e.Fields, o.Fields)
}

// goClient is the Go client (gameserver/client) on its own ENet host, serviced every millisecond
// on its own goroutine.
type goClient struct {
	mu   sync.Mutex
	cl   *client.Client
	err  error
	stop func()
}

func startGoClient(t *testing.T, addr netip.AddrPort) *goClient {
	t.Helper()
	h, err := enet.NewHost(enet.Config{Peers: 1, Channels: broadcast.Channels})
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Connect(addr, broadcast.Channels, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := &goClient{cl: client.NewLayout(arena.Schema().MustCompile())}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		defer h.Destroy()
		var ev enet.Event
		buf := make([]byte, 0, 256)
		send := func(m []byte, flags enet.PacketFlags) {
			if err := p.Send(broadcast.ChannelSnapshot, m, flags); err != nil {
				g.fail(fmt.Errorf("send: %w", err))
			}
		}
		up := false
		for ctx.Err() == nil {
			now := time.Now().UnixMilli()
			g.mu.Lock()
			for {
				ok, err := h.Service(&ev, 0)
				if err != nil {
					g.err = err
				}
				if !ok || err != nil {
					break
				}
				switch ev.Type {
				case enet.EventConnect:
					up = true
					send(g.cl.AppendHello(buf[:0]), enet.Reliable)
				case enet.EventDisconnect:
					g.err = fmt.Errorf("the server disconnected the Go client with %d", ev.Data)
				case enet.EventReceive:
					if err := g.cl.HandleMessage(ev.Packet.Bytes(), now); err != nil {
						g.err = fmt.Errorf("go client: %w", err)
					}
				}
			}
			if up && g.cl.AckDue() {
				if m, ok := g.cl.AppendAck(buf[:0]); ok {
					send(m, enet.Unreliable)
				}
			}
			if up && g.cl.PingDue(now) {
				send(g.cl.AppendPing(buf[:0], now), enet.Unreliable)
			}
			g.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	t.Cleanup(g.stop)
	return g
}

func (g *goClient) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

// view copies the Go client's view.
func (g *goClient) view() (map[uint16]viewEntity, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := map[uint16]viewEntity{}
	g.cl.Range(func(e client.Entity) bool {
		v[e.ID] = viewEntity{ID: e.ID, Kind: e.Kind, Pos: e.State.Pos, Rot: e.State.Rot,
			Vel:    [3]int32{int32(e.State.Vel[0]), int32(e.State.Vel[1]), int32(e.State.Vel[2])},
			Fields: append([]uint32{}, e.Fields...)}
		return true
	})
	return v, g.err
}

// botEvent is a line of the C bot's output.
type botEvent struct {
	Event       string       `json:"event"`
	Client      int          `json:"client"`
	Hash        string       `json:"hash"`
	Code        uint32       `json:"code"`
	Name        string       `json:"name"`
	Meaning     string       `json:"meaning"`
	Reason      string       `json:"reason"`
	Seq         int          `json:"seq"`
	State       int          `json:"state"`
	LastCommand int          `json:"lastCommand"`
	InputAck    int          `json:"inputAck"`
	Packets     uint64       `json:"packets"`
	Malformed   uint64       `json:"malformed"`
	Unapplied   uint64       `json:"unapplied"`
	Memory      int          `json:"memory"`
	Entities    []viewEntity `json:"entities"`
}

// cBot is the C bot program (bot/bot.c) running clients against a server.
type cBot struct {
	t      *testing.T
	stdin  io.WriteCloser
	events chan botEvent
}

func startCBot(t *testing.T, addr netip.AddrPort, schema string, clients int, flags ...string) *cBot {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--host", addr.Addr().String(), "--port", strconv.Itoa(int(addr.Port())),
		"--schema", schema, "--clients", strconv.Itoa(clients)}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &cBot{t: t, stdin: stdin, events: make(chan botEvent, 1024)}
	go func() {
		defer close(b.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var ev botEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = botEvent{Event: "unparsable", Reason: sc.Text()}
			}
			b.events <- ev
		}
	}()
	t.Cleanup(func() {
		_, _ = io.WriteString(stdin, "quit\n")
		_ = stdin.Close()
		for ev := range b.events { // until the bot exits
			_ = ev
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("C bot: %v", err)
		}
	})
	return b
}

func (b *cBot) send(line string) {
	b.t.Helper()
	if _, err := io.WriteString(b.stdin, line+"\n"); err != nil {
		b.t.Fatalf("C bot: %v", err)
	}
}

// next returns the next event of kind ev, skipping others.
func (b *cBot) next(ev string) botEvent {
	b.t.Helper()
	timeout := time.After(testDeadline)
	for {
		select {
		case e, ok := <-b.events:
			if !ok {
				b.t.Fatalf("C bot exited waiting for %q", ev)
			}
			if e.Event == "unparsable" {
				b.t.Fatalf("C bot wrote %q", e.Reason)
			}
			if e.Event == ev {
				return e
			}
			if e.Event == "closed" && ev != "closed" {
				b.t.Fatalf("C client %d closed with %d (%s): %s", e.Client, e.Code, e.Name, e.Reason)
			}
		case <-timeout:
			b.t.Fatalf("no %q from the C bot within %s", ev, testDeadline)
		}
	}
}

// views asks the bot for every client's view.
func (b *cBot) views(clients int) []botEvent {
	b.t.Helper()
	b.send("dump")
	out := make([]botEvent, clients)
	for range clients {
		v := b.next("view")
		out[v.Client] = v
	}
	return out
}

// compare checks a C client's view against the Go client's: every entity both may see is equal;
// every player and the score are in both; an entity only one of them holds is a marker (which
// only its owner sees) or a team's beacon (which only that team sees).
func compare(c botEvent, goView map[uint16]viewEntity) error {
	seen := map[uint16]bool{}
	for _, e := range c.Entities {
		seen[e.ID] = true
		g, ok := goView[e.ID]
		switch {
		case !ok && e.Kind != uint8(arena.KindMarker) && e.Kind != uint8(arena.KindBeacon):
			return fmt.Errorf("client %d holds entity %d (kind %d), the Go client does not", c.Client, e.ID, e.Kind)
		case ok && !e.equal(g):
			return fmt.Errorf("client %d: entity %d is %+v, the Go client's %+v", c.Client, e.ID, e, g)
		}
	}
	for id, g := range goView {
		if !seen[id] && g.Kind != uint8(arena.KindMarker) && g.Kind != uint8(arena.KindBeacon) {
			return fmt.Errorf("client %d lacks entity %d (kind %d)", c.Client, id, g.Kind)
		}
	}
	return nil
}

func count(v map[uint16]viewEntity, kind entity.Kind) int {
	n := 0
	for _, e := range v {
		if e.Kind == uint8(kind) {
			n++
		}
	}
	return n
}

// TestCClientsConvergeWithGoClient runs several C clients (the C bot) and the Go client against
// an arena game server run by gameserver/serve: the C library's schema from the server's JSON has
// the server's hash; while the players walk the server serves every client at its 60 Hz tick
// rate with no loss (the admin API's /v1/peers); the game applies every command the C clients
// send (their input acknowledgements); and once everything rests each C client's view equals
// the Go client's view of the entities both see.
func TestCClientsConvergeWithGoClient(t *testing.T) {
	const clients = 3
	srv := startArena(t)
	schema := writeSchema(t)
	goc := startGoClient(t, srv.game)
	bot := startCBot(t, srv.game, schema, clients)
	if h := bot.next("schema").Hash; h != fmt.Sprintf("%016x", arena.Schema().MustCompile().Hash()) {
		t.Fatalf("the C library's hash of the arena's schema JSON is %s, the server's %016x", h, arena.Schema().MustCompile().Hash())
	}
	deadline := time.Now().Add(testDeadline)
	waitFor := func(what string, cond func([]botEvent, map[uint16]viewEntity) error) []botEvent {
		t.Helper()
		for {
			goView, err := goc.view()
			if err != nil {
				t.Fatal(err)
			}
			views := bot.views(clients)
			err = cond(views, goView)
			if err == nil {
				return views
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s: %v", what, testDeadline, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("every player in every view", func(views []botEvent, goView map[uint16]viewEntity) error {
		if n := count(goView, arena.KindPlayer); n != clients+1 {
			return fmt.Errorf("the Go client sees %d players", n)
		}
		for _, v := range views {
			n := 0
			for _, e := range v.Entities {
				if e.Kind == uint8(arena.KindPlayer) {
					n++
				}
			}
			if n != clients+1 {
				return fmt.Errorf("client %d sees %d players", v.Client, n)
			}
		}
		return nil
	})

	// Walk: every player moves for several seconds, so every client is sent a packet a tick.
	bot.send("walk -20 20")
	for range clients {
		if e := bot.next("command"); e.Seq < 0 {
			t.Fatalf("client %d: walk command: %d", e.Client, e.Seq)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the rate is measured over the last second
	best := 0.0
	var last netcode.PeersResponse
	for range 5 {
		last = srv.peers(t)
		if len(last.Peers) != clients+1 {
			t.Fatalf("the server reports %d peers, want %d", len(last.Peers), clients+1)
		}
		low := 1000.0
		for _, p := range last.Peers {
			low = min(low, p.SendRateHz)
			if p.LossRatio != 0 || p.RateClass != 1 {
				t.Errorf("peer %d: loss %.3f, rate class %d; want no loss at rate class 1 on loopback", p.Slot, p.LossRatio, p.RateClass)
			}
		}
		best = max(best, low)
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range last.Peers {
		t.Logf("peer %d: %.0f Hz, loss %.3f, rtt %.1f ms, class %d, throttle %.2f, %s %s", p.Slot, p.SendRateHz, p.LossRatio, p.RTTMillis, p.RateClass, p.Throttle, p.State, p.CongestedBy)
	}
	// A tick the loop could not keep on a loaded machine costs a sample a packet; 57 of 60 is
	// "every tick" with that allowance.
	if best < 57 {
		t.Errorf("the slowest peer was served at %.1f Hz at best, want the tick rate (60 Hz)", best)
	}

	bot.send("fire 0.3")
	for range clients {
		if e := bot.next("command"); e.Seq < 0 {
			t.Fatalf("client %d: fire command: %d", e.Client, e.Seq)
		}
	}
	views := waitFor("at rest, every C view equal to the Go client's", func(views []botEvent, goView map[uint16]viewEntity) error {
		if n := count(goView, arena.KindProjectile); n > 0 {
			return fmt.Errorf("%d projectiles in flight", n)
		}
		for _, e := range goView {
			if e.Vel != [3]int32{} {
				return fmt.Errorf("entity %d still moves", e.ID)
			}
		}
		for _, v := range views {
			if v.InputAck != v.LastCommand || v.LastCommand != 1 {
				return fmt.Errorf("client %d: input ack %d, last command %d", v.Client, v.InputAck, v.LastCommand)
			}
			if err := compare(v, goView); err != nil {
				return err
			}
		}
		return nil
	})
	for _, v := range views {
		if v.Malformed != 0 {
			t.Errorf("client %d counted %d malformed messages", v.Client, v.Malformed)
		}
		t.Logf("client %d: %d entities, %d packets, %d unapplied, %d bytes", v.Client, len(v.Entities), v.Packets, v.Unapplied, v.Memory)
	}
}

// TestCClientSchemaMismatch: a C client whose schema is not the server's is refused with 4004,
// and sees the code with its name and the server's CLOSE reason.
func TestCClientSchemaMismatch(t *testing.T) {
	srv := startArena(t)
	raw, err := os.ReadFile(writeSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	// The same kinds, one renamed: another schema, another hash.
	kinds, ok := s["kinds"].([]any)
	if !ok || len(kinds) == 0 {
		t.Fatalf("schema JSON without kinds: %s", raw)
	}
	kinds[0].(map[string]any)["name"] = "avatar"
	other, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	bot := startCBot(t, srv.game, path, 1)
	if h := bot.next("schema").Hash; h == fmt.Sprintf("%016x", arena.Schema().MustCompile().Hash()) {
		t.Fatal("the renamed schema has the server's hash")
	}
	ev := bot.next("closed")
	if ev.Code != 4004 || ev.Name != "schema" {
		t.Fatalf("closed with %d (%s), want 4004 (schema)", ev.Code, ev.Name)
	}
	if ev.Reason == "" {
		t.Error("no CLOSE reason reached the client")
	}
	t.Logf("closed: %d %s: %s; reason %q", ev.Code, ev.Name, ev.Meaning, ev.Reason)
}

// TestCClientRateClass: the rate class a C client declares in its connect data reaches the
// server, which serves it every second tick (30 Hz at the 60 Hz tick rate) while the player walks.
func TestCClientRateClass(t *testing.T) {
	srv := startArena(t)
	bot := startCBot(t, srv.game, writeSchema(t), 1, "--rate-class", "2")
	bot.next("connected")
	deadline := time.Now().Add(testDeadline)
	for len(bot.views(1)[0].Entities) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no entities within %s", testDeadline)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bot.send("walk 30 -30")
	if e := bot.next("command"); e.Seq != 0 {
		t.Fatalf("walk command: %d", e.Seq)
	}
	time.Sleep(1500 * time.Millisecond) // the rate is measured over the last second
	p := srv.peers(t)
	if len(p.Peers) != 1 {
		t.Fatalf("the server reports %d peers", len(p.Peers))
	}
	if got := p.Peers[0]; got.RateClass != 2 || got.SendRateHz < 25 || got.SendRateHz > 31 {
		t.Fatalf("peer: rate class %d at %.1f Hz, want class 2 at 30 Hz", got.RateClass, got.SendRateHz)
	}
}
