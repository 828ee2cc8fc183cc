//go:build unix && !linux

package devlocal

import "syscall"

// childAttr puts a child in a process group of its own, so that a Ctrl-C in
// the terminal reaches devtool alone and devtool stops the children in order.
// Outside Linux there is no parent-death signal: a child outlives a devtool
// killed with SIGKILL.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
