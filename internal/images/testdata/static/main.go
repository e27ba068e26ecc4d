// Command static is a static binary for the image tests: it prints its user and group ids.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Printf("uid=%d gid=%d\n", os.Getuid(), os.Getgid()) }
