package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// What the benchmarks read of their processes in /proc: CPU time and
// peak memory.

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times on Linux.
const clockTicks = 100

// statCPU returns the sum of two CPU-time fields of process pid's
// /proc/<pid>/stat, in seconds, counted from the state field (0) after the
// parenthesized command: utime and stime are 11 and 12, cutime and cstime
// (its children it has waited for) 13 and 14. 0 when pid is gone.
func statCPU(pid, first, second int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) <= max(first, second) {
		return 0
	}
	u, _ := strconv.ParseFloat(f[first], 64)
	s, _ := strconv.ParseFloat(f[second], 64)
	return (u + s) / clockTicks
}

// cpuOf returns the CPU-seconds (user + system) process pid has used.
func cpuOf(pid int) float64 { return statCPU(pid, 11, 12) }

// reapedCPUOf returns the CPU-seconds of process pid's children that it
// has waited for (cutime + cstime).
func reapedCPUOf(pid int) float64 { return statCPU(pid, 13, 14) }

// selfCPU returns the CPU-seconds this process has used: the senders',
// while a phase runs only them.
func selfCPU() float64 { return cpuOf(os.Getpid()) }

// peakRSS returns process pid's peak resident set (VmHWM) in KiB.
func peakRSS(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}
