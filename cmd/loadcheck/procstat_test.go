package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStatusKB(t *testing.T) {
	status := []byte("Name:\tcardshop\nVmPeak:\t 900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n")
	got, err := parseStatusKB(status, "VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	if got != 51200*1024 {
		t.Fatalf("VmHWM = %d bytes, want %d", got, 51200*1024)
	}
	if _, err := parseStatusKB(status, "VmSwap:"); err == nil {
		t.Fatal("a missing line was read")
	}
}

// TestProcOwnProcess reads this test process's own figures: CPU time grows with work, and the
// peak RSS is at least the current RSS and grows past a fresh allocation after a reset.
func TestProcOwnProcess(t *testing.T) {
	pid := os.Getpid()
	before := sampleCPU([]int{pid})
	// Spin until the kernel's own account of this process (getrusage) has 100 ms more CPU, not
	// for 100 ms of wall time: on a loaded machine the wall time holds much less CPU.
	start := processCPU(t)
	for processCPU(t)-start < 100*time.Millisecond {
	}
	after := sampleCPU([]int{pid})
	u := cpuBetween(before, after, []int{pid}, 10)
	if !u.measured || u.seconds < 0.05 {
		t.Fatalf("100 ms of CPU spent spinning measured as %+v, want ≥ 0.05 s", u)
	}
	if u.perRequest() != u.seconds/10*1e6 {
		t.Fatalf("perRequest %v", u.perRequest())
	}
	if m := cpuBetween(before, after, []int{pid, -1}, 10); m.measured {
		t.Fatal("a pid missing from the samples counted as measured")
	}

	// Free heap pages go back to the system first, so that the allocation below must touch new
	// ones rather than reuse resident ones (an earlier run in this process left some).
	debug.FreeOSMemory()
	if !resetPeakRSS(pid) {
		t.Skip("this kernel refuses the reset of VmHWM")
	}
	base, err := procPeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = 1
	}
	peak, err := procPeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	if peak < base+48<<20 {
		t.Fatalf("peak RSS %s after touching 64 MiB, from %s", mib(peak), mib(base))
	}
	_ = buf[len(buf)-1]
}

func TestRSSSpread(t *testing.T) {
	results := []scenarioResult{
		{peakRSS: []int64{50, 40}, rssNames: []string{"instance-1", "instance-2"}},
		{peakRSS: []int64{60}, rssNames: []string{"instance-1"}},
		{peakRSS: []int64{30}, rssNames: []string{"fresh"}}, // one scenario only: not compared
		{peakRSS: []int64{70, 41}, rssNames: []string{"instance-1", "instance-2"}},
	}
	peaks := func(r scenarioResult) []int64 { return r.peakRSS }
	name, lo, hi, ok := growthOf(results, peaks)
	if !ok || name != "instance-1" || lo != 50 || hi != 70 {
		t.Fatalf("growthOf = %s %d..%d %v, want instance-1 50..70", name, lo, hi, ok)
	}
	if _, _, _, ok := growthOf(results[2:3], peaks); ok {
		t.Fatal("an instance of one scenario was compared with itself")
	}
	// Unknown values (negative) are left out: instance-2's live heap is known in one scenario only.
	results[0].liveHeap, results[1].liveHeap, results[3].liveHeap = []int64{10, -1}, []int64{12}, []int64{11, 9}
	name, lo, hi, ok = growthOf(results, func(r scenarioResult) []int64 { return r.liveHeap })
	if !ok || name != "instance-1" || lo != 10 || hi != 12 {
		t.Fatalf("growthOf of live heaps = %s %d..%d %v, want instance-1 10..12", name, lo, hi, ok)
	}
}

// The live heap is the HeapAlloc line of the heap profile's text form; the harness reads it
// from a Go process the same way (this test's own pprof handler).
func TestLiveHeap(t *testing.T) {
	if n, err := parseHeapAlloc([]byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 5\n# HeapAlloc = 12345678\n# HeapSys = 9\n")); err != nil || n != 12345678 {
		t.Fatalf("parseHeapAlloc = %d, %v", n, err)
	}
	if _, err := parseHeapAlloc([]byte("# Alloc = 5\n")); err == nil {
		t.Fatal("a profile without HeapAlloc parsed")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	keep := make([]byte, 32<<20)
	n, err := liveHeap(t.Context(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || n < 32<<20 {
		t.Fatalf("liveHeap = %s, %v; want at least the 32 MiB this test holds", mib(n), err)
	}
	runtime.KeepAlive(keep)
}

// processCPU is this process's user and system CPU time so far, by getrusage.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
