package session

// ingress is a session's inbound byte budget and abuse accounting.
//
// Every inbound message is charged its size against a token bucket refilled at
// ingress.bytesPerSecond and holding one window's worth (ingress.windowMs of bytes, at least one
// message of memory.maxInboundMessageBytes). A COMMAND that the bucket cannot cover is refused
// whole. ACKs and PINGs keep the session alive, so they are charged but refused only once the
// bucket is a full window in debt, which no client sending within its budget reaches: a refused
// ACK or PING means the client floods them.
//
// Refusals are counted per window. A window with at least ingress.abuseRefusalsPerWindow
// refusals is abusive; ingress.abuseWindows adjacent abusive windows close the session with
// protocol.CloseAbuse. A window without one breaks the run.
type ingress struct {
	tokens      float64
	capacity    float64
	perMs       float64
	lastMs      int64
	windowMs    int64
	windowStart int64
	refusals    int // in the current window
	abusiveRun  int // adjacent abusive windows just closed
	perWindow   int
	windows     int
}

// reset starts the accounting at nowMs with a full bucket.
func (g *ingress) reset(c *Config, nowMs int64) {
	*g = ingress{windowStart: nowMs, lastMs: nowMs}
	g.configure(c)
	g.tokens = g.capacity
}

// configure takes new limits, keeping the bucket's level (capped) and the window's progress.
func (g *ingress) configure(c *Config) {
	g.perMs = float64(c.IngressBytesPerSecond) / 1000
	g.windowMs = max(c.IngressWindowMs, 1)
	g.capacity = max(float64(c.IngressBytesPerSecond)*float64(g.windowMs)/1000, float64(c.MaxInboundMessageBytes))
	g.tokens = min(g.tokens, g.capacity)
	g.perWindow = max(c.AbuseRefusalsPerWindow, 1)
	g.windows = max(c.AbuseWindows, 1)
}

func (g *ingress) refill(nowMs int64) {
	if nowMs > g.lastMs {
		g.tokens = min(g.capacity, g.tokens+float64(nowMs-g.lastMs)*g.perMs)
		g.lastMs = nowMs
	}
}

// admit charges a message of n bytes and reports whether it is accepted; control messages (ACK,
// PING) are refused only when the bucket is a full window in debt.
func (g *ingress) admit(n int, control bool, nowMs int64) bool {
	g.roll(nowMs)
	g.refill(nowMs)
	size := float64(n)
	switch {
	case !control && g.tokens >= size:
	case control && g.tokens > -g.capacity:
	default:
		g.refusals++
		return false
	}
	g.tokens -= size
	return true
}

// roll closes every window that ended by nowMs and reports whether the session is abusive:
// abuseWindows adjacent abusive windows.
func (g *ingress) roll(nowMs int64) bool {
	for nowMs >= g.windowStart+g.windowMs {
		if g.refusals >= g.perWindow {
			g.abusiveRun++
		} else {
			g.abusiveRun = 0
		}
		g.refusals = 0
		g.windowStart += g.windowMs
		if nowMs >= g.windowStart+g.windowMs {
			// At least one more window passed without a single message: no abuse in it.
			g.abusiveRun = 0
			g.windowStart += (nowMs - g.windowStart) / g.windowMs * g.windowMs
		}
	}
	return g.abusiveRun >= g.windows
}
