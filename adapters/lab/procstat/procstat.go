package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ (`getconf CLK_TCK`): the unit of utime and stime in
// /proc/<pid>/stat. It is 100 on every Linux this runs on (the ABI fixes it for x86 and arm64).
const clockTicks = 100

// CPU returns the CPU time the process pid has used so far, in seconds: its utime + stime
// from /proc/<pid>/stat (user and kernel time of all its threads, not its children's). The
// load check reads the service's with it, and the broker benchmarks RabbitMQ's.
func CPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseCPU(b)
}

// ParseCPU reads utime + stime (fields 14 and 15) of a /proc/<pid>/stat line, in seconds.
// The command name (field 2, in parentheses) may hold spaces and parentheses, so the fields are
// counted from the last ')'.
func ParseCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no ')' in %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name, want ≥ 13", len(f))
	}
	ut, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat utime: %w", err)
	}
	st, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat stime: %w", err)
	}
	return float64(ut+st) / clockTicks, nil
}
