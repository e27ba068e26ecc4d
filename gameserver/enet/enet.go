// Package enet is netfleet's thin cgo binding to the system libenet 1.3.17
// (pkg-config name libenet).
//
// It owns the lifetimes of ENet hosts, peers and packets, the library's
// process-wide initialisation, the per-source connect-rate limiter that runs in
// C inside ENet's receive path (so a refused CONNECT never costs an ENet peer),
// and the link statistics read straight from ENetPeer. Nothing above this
// package sees a C type: callers get Host, Peer, Packet, Event and plain Go
// values, and no Go pointer is ever kept by C.
//
// Threading: a Host, its Peers and the Packets it delivers are not safe for
// concurrent use; one goroutine at a time services a host and acts on its
// peers. Different hosts may be used from different goroutines. The
// exceptions, safe from any goroutine while the host lives, are
// Host.SetConnectRate, Host.ConnectRefusals and Host.MalformedDatagrams.
//
// The libenet of this version is IPv4 only, so every address is IPv4 (an
// IPv4-mapped IPv6 address is accepted and unmapped).
//
// This package imports nothing from netfleet.
package enet

/*
#cgo pkg-config: libenet
#include "nfenet.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrDestroyed is returned by operations on a Host after Destroy.
var ErrDestroyed = errors.New("enet: host destroyed")

// lib reference-counts enet_initialize/enet_deinitialize across hosts so any
// number of hosts (and tests) can come and go in one process.
var lib struct {
	mu   sync.Mutex
	refs int
}

func acquireLib() error {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.refs == 0 {
		// Peer and host fields are read by offset from the headers this package
		// was built with; a different runtime library would misread them.
		linked, built := uint32(C.enet_linked_version()), uint32(C.nfe_header_version())
		if linked != built {
			return fmt.Errorf("enet: linked libenet %s differs from the headers built against (%s)",
				versionString(linked), versionString(built))
		}
		if C.enet_initialize() != 0 {
			return errors.New("enet: enet_initialize failed")
		}
	}
	lib.refs++
	return nil
}

func releaseLib() {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	lib.refs--
	if lib.refs == 0 {
		C.enet_deinitialize()
	}
}

func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>16&0xff, v>>8&0xff, v&0xff)
}

// millis converts d to ENet's millisecond arguments: negative becomes 0, a
// positive duration under 1 ms rounds up to 1 (0 often means "default" to ENet)
// and anything too large saturates.
func millis(d time.Duration) C.enet_uint32 {
	switch {
	case d <= 0:
		return 0
	case d < time.Millisecond:
		return 1
	case d.Milliseconds() > math.MaxUint32:
		return math.MaxUint32
	default:
		return C.enet_uint32(d.Milliseconds())
	}
}

// CHeapBytes reports the bytes currently allocated from the C heap (glibc
// mallinfo2: arena plus mmapped chunks). ENet keeps its hosts, peers, queued
// commands and packets there, out of sight of Go's runtime metrics. It walks
// every malloc arena under their locks, so call it at scrape rate, not per tick.
func CHeapBytes() uint64 {
	return uint64(C.nfe_heap_in_use())
}
