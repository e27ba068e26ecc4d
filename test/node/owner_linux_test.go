//go:build linux

package node

import (
	"os"
	"strconv"
	"syscall"
)

func fileOwner(fi os.FileInfo) (uid, gid string) {
	st := fi.Sys().(*syscall.Stat_t)
	return strconv.Itoa(int(st.Uid)), strconv.Itoa(int(st.Gid))
}
