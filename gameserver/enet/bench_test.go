package enet

import (
	"testing"
	"time"
)

// BenchmarkSendService measures client-to-server throughput over loopback:
// Send into ENet, flush every batch, and service the server until the batch
// is delivered (reliable) or the socket runs dry (unreliable).
func BenchmarkSendService(b *testing.B) {
	const batch = 32
	for _, bc := range []struct {
		name  string
		size  int
		flags PacketFlags
	}{
		{"reliable-64B", 64, Reliable},
		{"unreliable-64B", 64, Unreliable},
		{"reliable-1200B", 1200, Reliable},
		{"unreliable-1200B", 1200, Unreliable},
	} {
		b.Run(bc.name, func(b *testing.B) {
			server, client := newServer(b), newClient(b, 1)
			serverEnd, clientEnd := connect(b, server, client, 1)
			// Keep ENet's RTT-driven throttle from dropping unreliable packets, so
			// the figure is the binding's and the socket's, not the throttle's.
			serverEnd.ConfigureThrottle(time.Second, 2, 0)
			clientEnd.ConfigureThrottle(time.Second, 2, 0)
			msg := make([]byte, bc.size)
			var sev, cev Event
			sent, received := 0, 0
			drain := func() {
				deadline := time.Now().Add(testDeadline)
				for idle := 0; received < sent; {
					// The client sends what its reliable window now allows and
					// takes the server's acknowledgements.
					if _, err := client.Service(&cev, 0); err != nil {
						b.Fatal(err)
					}
					ok, err := server.Service(&sev, time.Millisecond)
					if err != nil {
						b.Fatal(err)
					}
					if ok {
						idle = 0
						if sev.Type == EventReceive {
							received++
						}
						continue
					}
					idle++
					if bc.flags != Reliable && idle > 3 {
						return // the rest of the batch was lost
					}
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d packets delivered", received, sent)
					}
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			for i := range b.N {
				if err := clientEnd.Send(0, msg, bc.flags); err != nil {
					b.Fatal(err)
				}
				sent++
				if (i+1)%batch == 0 || i == b.N-1 {
					client.Flush()
					drain()
				}
			}
			b.StopTimer()
			sev.Packet.Destroy()
			b.ReportMetric(float64(received)/b.Elapsed().Seconds(), "packets/s")
			b.ReportMetric(float64(received)/float64(sent), "delivered")
		})
	}
}
