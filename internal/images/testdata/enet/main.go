// Command enet links the system libenet through cgo, as the game server does, for the image
// tests: it initializes ENet, creates a host, and prints the linked version and its user id.
package main

/*
#cgo pkg-config: libenet
#include <enet/enet.h>
*/
import "C"

import (
	"fmt"
	"os"
)

func main() {
	if C.enet_initialize() != 0 {
		fmt.Fprintln(os.Stderr, "enet_initialize failed")
		os.Exit(1)
	}
	defer C.enet_deinitialize()
	host := C.enet_host_create(nil, 1, 1, 0, 0)
	if host == nil {
		fmt.Fprintln(os.Stderr, "enet_host_create failed")
		os.Exit(1)
	}
	C.enet_host_destroy(host)
	v := C.enet_linked_version()
	fmt.Printf("enet %d.%d.%d uid=%d\n", (v>>16)&0xff, (v>>8)&0xff, v&0xff, os.Getuid())
}
