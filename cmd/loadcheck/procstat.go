package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"cardshop/adapters/lab/procstat"
)

// procPeakRSS returns the process's peak resident set size in bytes: VmHWM from
// /proc/<pid>/status (since it started, or since resetPeakRSS).
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmHWM:")
}

// resetPeakRSS sets the process's VmHWM back to its current RSS (writing 5 to
// /proc/<pid>/clear_refs, Linux ≥ 4.0; the harness owns the process), so that the next
// procPeakRSS is the peak of what ran since. It reports whether the reset took.
func resetPeakRSS(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// parseStatusKB reads the "Name:   N kB" line of a /proc/<pid>/status in bytes.
func parseStatusKB(b []byte, name string) (int64, error) {
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, name) {
			continue
		}
		f := strings.Fields(l[len(name):])
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: %q", l)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: %q: %w", l, err)
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("/proc status: no %s line", name)
}

// cpuSample is the CPU time of each measured process at one moment, by pid.
type cpuSample map[int]float64

// sampleCPU reads the CPU time of each pid; a pid that cannot be read (ended) is left out.
func sampleCPU(pids []int) cpuSample {
	s := make(cpuSample, len(pids))
	for _, p := range pids {
		if c, err := procstat.CPU(p); err == nil {
			s[p] = c
		}
	}
	return s
}

// cpuUse is the service CPU time one measured wrk run cost: the sum over its instances.
type cpuUse struct {
	seconds  float64 // utime + stime of the instances during the run
	requests int64   // the answers wrk counted in the run
	measured bool    // every instance was read before and after
}

// perRequest is the CPU time per answer in microseconds.
func (u cpuUse) perRequest() float64 {
	if u.requests <= 0 {
		return 0
	}
	return u.seconds / float64(u.requests) * 1e6
}

// cpuBetween sums the CPU time each pid used between before and after; measured is false when
// a pid is missing from either sample.
func cpuBetween(before, after cpuSample, pids []int, requests int64) cpuUse {
	u := cpuUse{requests: requests, measured: len(pids) > 0}
	for _, p := range pids {
		b, ok1 := before[p]
		a, ok2 := after[p]
		if !ok1 || !ok2 {
			u.measured = false
			continue
		}
		u.seconds += a - b
	}
	return u
}

// mib formats a byte count in MiB with one decimal.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// liveHeap returns the Go heap an instance holds live: it asks its pprof endpoint (addr) for the
// heap profile after a garbage collection (gc=1) and reads the runtime's HeapAlloc from it. A
// peak RSS follows the load a scenario puts on the process (Go keeps the heap it grew to for a
// while); the live heap after a collection is what would grow if the service kept something
// per order.
func liveHeap(ctx context.Context, addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, b, err := request(ctx, http.DefaultClient, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("pprof heap at %s answered %d", addr, status)
	}
	return parseHeapAlloc(b)
}

// parseHeapAlloc reads the "# HeapAlloc = N" line of a heap profile in its text form.
func parseHeapAlloc(b []byte) (int64, error) {
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("heap profile without a HeapAlloc line")
}
