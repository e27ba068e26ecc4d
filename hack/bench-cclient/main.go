// Command bench-cclient measures the C client library (clients/c) against the Go client
// (gameserver/client) in the same run, on the same recorded stream of SNAPSHOT packets of the
// arena example game's schema: decode throughput in records per second (each client decodes and
// applies every packet and builds an ACK after it, as a game's loop does) and memory per
// connection once the client holds the stream's entities and their histories.
//
// The stream is built with the server's own encoder (protocol.SnapshotEncoder): a first frame of
// spawns, then a frame a tick in which every entity moves (a delta against the previous tick)
// and every tenth tick its health changes, in packets of the default 1200 bytes.
//
//	go run ./hack/bench-cclient --out _out/bench
//
// make bench runs it; it prints a table and writes bench-cclient.json.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/netfleet/netfleet/examples/arena"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

type result struct {
	Client               string  `json:"client"`
	Records              int64   `json:"records"`
	Seconds              float64 `json:"seconds"`
	RecordsPerSec        float64 `json:"recordsPerSec"`
	Entities             int     `json:"entities"`
	MemoryPerClientBytes int64   `json:"memoryPerClientBytes"`
}

type report struct {
	Entities   int      `json:"entities"`
	Ticks      int      `json:"ticks"`
	Packets    int      `json:"packets"`
	Records    int      `json:"records"`
	Bytes      int      `json:"bytes"`
	Results    []result `json:"results"`
	CPerGoRate float64  `json:"cPerGoThroughput"`
}

func main() {
	out := flag.String("out", "_out/bench", "directory for bench-cclient.json and the stream")
	entities := flag.Int("entities", 256, "entities in the stream")
	ticks := flag.Int("ticks", 2000, "ticks in the stream")
	runs := flag.Int("runs", 5, "runs of each client over the stream; the best counts")
	clients := flag.Int("clients", 20, "clients whose memory is averaged")
	flag.Parse()
	if err := run(*out, *entities, *ticks, *runs, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "bench-cclient:", err)
		os.Exit(1)
	}
}

func run(out string, entities, ticks, runs, clients int) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	layout := arena.Schema().MustCompile()
	msgs, records, err := buildStream(layout, entities, ticks)
	if err != nil {
		return err
	}
	var file bytes.Buffer
	n := 0
	for _, m := range msgs {
		file.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(m))))
		file.Write(m)
		n += len(m)
	}
	streamPath := filepath.Join(out, "bench-cclient-stream.bin")
	schemaPath := filepath.Join(out, "bench-cclient-schema.json")
	schemaJSON, err := json.Marshal(arena.Schema())
	if err != nil {
		return err
	}
	if err := errors.Join(os.WriteFile(streamPath, file.Bytes(), 0o644), os.WriteFile(schemaPath, schemaJSON, 0o644)); err != nil {
		return err
	}
	rep := report{Entities: entities, Ticks: ticks, Packets: len(msgs), Records: records, Bytes: n}

	goRes, err := benchGo(layout, msgs, runs, clients)
	if err != nil {
		return err
	}
	cRes, err := benchC(schemaPath, streamPath, runs, clients)
	if err != nil {
		return err
	}
	if goRes.Records != cRes.Records || goRes.Entities != cRes.Entities {
		return fmt.Errorf("the clients disagree: Go %d records, %d entities; C %d records, %d entities",
			goRes.Records, goRes.Entities, cRes.Records, cRes.Entities)
	}
	rep.Results = []result{goRes, cRes}
	rep.CPerGoRate = cRes.RecordsPerSec / goRes.RecordsPerSec

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "client\trecords\tbest run (s)\trecords/s\tentities\tmemory/client (bytes)\t\n")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.0f\t%d\t%d\t\n", r.Client, r.Records, r.Seconds, r.RecordsPerSec, r.Entities, r.MemoryPerClientBytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("stream: %d entities, %d ticks, %d packets, %d bytes; C throughput / Go: %.2f\n",
		entities, ticks, len(msgs), n, rep.CPerGoRate)
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "bench-cclient.json"), append(b, '\n'), 0o644)
}

// buildStream encodes the stream: the messages and how many records they carry.
func buildStream(l *protocol.Layout, entities, ticks int) ([][]byte, int, error) {
	kind := l.Kind(uint8(arena.KindPlayer))
	health, hits := kind.Field("health"), kind.Field("hits")
	states := make([]protocol.State, entities)
	fields := make([][]uint32, entities)
	for i := range entities {
		states[i] = protocol.State{Pos: [3]int32{int32(i * 64), int32(-i * 32), 0}, Rot: 0xe0080200, Vel: [3]int16{64, 0, 0}}
		fields[i] = make([]uint32, kind.Words)
		if err := errors.Join(health.PutFloat(fields[i], 100), hits.PutUint(fields[i], uint64(i))); err != nil {
			return nil, 0, err
		}
	}
	var (
		enc     protocol.SnapshotEncoder
		msgs    [][]byte
		records int
		seq     uint16
	)
	enc.SetLayout(l)
	buf := make([]byte, 1200)
	begin := func(tick uint32) {
		enc.Begin(buf, &protocol.SnapshotHeader{Tick: tick, ServerTimeMs: tick * 16, Seq: seq})
		seq++
	}
	flush := func() {
		records += enc.Records()
		msgs = append(msgs, bytes.Clone(enc.Finish()))
	}
	for t := 1; t <= ticks; t++ {
		tick := uint32(t)
		begin(tick)
		for i := range entities {
			var write func() bool
			if t == 1 {
				write = func() bool { return enc.Spawn(uint16(i), uint8(arena.KindPlayer), &states[i], fields[i]) }
			} else {
				base, baseFields := states[i], append([]uint32(nil), fields[i]...)
				cur := base
				cur.Pos[0] += int32(1 + (t+i)%5)
				cur.Pos[1] += int32((t*7+i)%11 - 5)
				if (t+i)%10 == 0 {
					if err := health.PutFloat(fields[i], float64((t+i)%101)); err != nil {
						return nil, 0, err
					}
				}
				states[i] = cur
				write = func() bool {
					return enc.Delta(uint16(i), 1, uint8(arena.KindPlayer), &base, &cur, baseFields, fields[i])
				}
			}
			if !write() { // the packet is full: the rest of the tick goes in the next one
				flush()
				begin(tick)
				if !write() {
					return nil, 0, errors.New("a record does not fit an empty packet")
				}
			}
		}
		flush()
	}
	return msgs, records, nil
}

// feedGo gives the Go client every message, with an ACK after each.
func feedGo(cl *client.Client, msgs [][]byte, ack []byte) error {
	for _, m := range msgs {
		if err := cl.HandleMessage(m, 0); err != nil {
			return err
		}
		ack, _ = cl.AppendAck(ack[:0])
	}
	return nil
}

func benchGo(l *protocol.Layout, msgs [][]byte, runs, clients int) (result, error) {
	r := result{Client: "Go (gameserver/client)"}
	ack := make([]byte, 0, 128)
	for range runs {
		cl := client.NewLayout(l)
		start := time.Now()
		if err := feedGo(cl, msgs, ack); err != nil {
			return r, err
		}
		d := time.Since(start).Seconds()
		if r.Seconds == 0 || d < r.Seconds {
			r.Seconds = d
		}
		st := cl.Stats()
		r.Records = int64(st.RecordsApplied + st.RecordsStale + st.RecordsUnapplied)
		r.Entities = cl.Len()
	}
	r.RecordsPerSec = float64(r.Records) / r.Seconds
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := make([]*client.Client, clients)
	for i := range held {
		held[i] = client.NewLayout(l)
		if err := feedGo(held[i], msgs, ack); err != nil {
			return r, err
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	r.MemoryPerClientBytes = int64(after.HeapAlloc-before.HeapAlloc) / int64(clients)
	runtime.KeepAlive(held)
	runtime.KeepAlive(msgs) // the stream is in both readings
	return r, nil
}

func benchC(schemaPath, streamPath string, runs, clients int) (result, error) {
	r := result{Client: "C (clients/c)"}
	if out, err := exec.Command("make", "-C", "clients/c", "--no-print-directory", "bench").CombinedOutput(); err != nil {
		return r, fmt.Errorf("make -C clients/c bench: %w\n%s", err, out)
	}
	out, err := exec.Command("clients/c/build/nfbench", "--schema", schemaPath, "--stream", streamPath,
		"--runs", fmt.Sprint(runs), "--clients", fmt.Sprint(clients)).Output()
	if err != nil {
		return r, fmt.Errorf("nfbench: %w", err)
	}
	var c struct {
		Records              int64   `json:"records"`
		Seconds              float64 `json:"seconds"`
		RecordsPerSec        float64 `json:"recordsPerSec"`
		Entities             int     `json:"entities"`
		MemoryPerClientBytes int64   `json:"memoryPerClientBytes"`
	}
	if err := json.Unmarshal(out, &c); err != nil {
		return r, fmt.Errorf("nfbench output %q: %w", out, err)
	}
	r.Records, r.Seconds, r.RecordsPerSec, r.Entities, r.MemoryPerClientBytes = c.Records, c.Seconds, c.RecordsPerSec, c.Entities, c.MemoryPerClientBytes
	return r, nil
}
