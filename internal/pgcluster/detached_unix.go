//go:build unix

package pgcluster

import "syscall"

func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
