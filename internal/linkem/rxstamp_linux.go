package linkem

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// rxOOBSize holds one SCM_TIMESTAMPNS control message.
var rxOOBSize = unix.CmsgSpace(16)

// enableRxStamps asks the kernel to stamp every datagram c receives with its arrival time, so a
// packet's model time is when it reached the socket, not when a goroutine got around to reading
// it.
func enableRxStamps(c *net.UDPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("receive timestamps: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return fmt.Errorf("receive timestamps: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("receive timestamps: %w", serr)
	}
	return nil
}

// rxStamp returns the kernel arrival time (Unix ns, wall clock) carried in oob.
func rxStamp(oob []byte) (int64, bool) {
	for len(oob) > 0 {
		hdr, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return 0, false
		}
		if hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SCM_TIMESTAMPNS && len(data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(data))
			nsec := int64(binary.NativeEndian.Uint64(data[8:]))
			return sec*1e9 + nsec, true
		}
		oob = rest
	}
	return 0, false
}
