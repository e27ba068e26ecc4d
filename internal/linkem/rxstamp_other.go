//go:build !linux

package linkem

import "net"

// rxOOBSize is 0: without kernel receive timestamps a packet's model time is when it was read.
var rxOOBSize = 0

func enableRxStamps(*net.UDPConn) error { return nil }

func rxStamp([]byte) (int64, bool) { return 0, false }
