package devlocal

import "syscall"

// childAttr puts a child in a process group of its own, so that a Ctrl-C in
// the terminal reaches devtool alone and devtool stops the children in order,
// and has the kernel send it SIGTERM should devtool die without doing so.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
