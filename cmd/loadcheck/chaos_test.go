package main

import (
	"fmt"
	"testing"
	"time"
)

// A run of 10 s: orders placed in seconds 1-3 (and some 409s, which count neither way), the
// fault from 4 to 6 (503s only), refusals and orders mixed in second 7, orders only from 8.
func TestChaosSplit(t *testing.T) {
	start := time.Unix(1000, 0)
	counts := map[string]int64{"status 201": 999} // other tallies are ignored
	for s := int64(0); s < 10; s++ {
		sec := fmt.Sprintf("sec:%d:", 1000+s)
		switch {
		case s < 4:
			counts[sec+"201"], counts[sec+"409"] = 100, 10
		case s < 7:
			counts[sec+"503"] = 50
		case s == 7:
			counts[sec+"503"], counts[sec+"201"] = 5, 20
		default:
			counts[sec+"201"] = 80
		}
	}
	cr := &chaosResult{injected: time.Unix(1004, 300e6), back: time.Unix(1006, 100e6), refusedMix: map[int]int64{}}
	cr.split(counts, start, start.Add(10*time.Second))
	if got := cr.firstOK.Unix(); got != 1008 {
		t.Errorf("first second with orders only = %d, want 1008", got)
	}
	if cr.refused != 155 || cr.refusedMix[503] != 155 {
		t.Errorf("refused %d (%v), want 155 503s", cr.refused, cr.refusedMix)
	}
	// before: seconds 1-3 (the first is taken as partial); during: 5 (4 and 6 straddle the fault's
	// start and end); after: 8 and 9.
	for _, c := range []struct {
		name string
		r    rate
		want rate
	}{
		{"before", cr.before, rate{3, 300}}, {"during", cr.during, rate{1, 0}}, {"after", cr.after, rate{2, 160}},
	} {
		if c.r != c.want {
			t.Errorf("%s = %+v, want %+v", c.name, c.r, c.want)
		}
	}
}

func TestChaosSplitNeverRecovered(t *testing.T) {
	start := time.Unix(1000, 0)
	counts := map[string]int64{"sec:1001:201": 10, "sec:1005:503": 7, "sec:1008:503": 3}
	cr := &chaosResult{injected: time.Unix(1004, 0), back: time.Unix(1006, 0), refusedMix: map[int]int64{}}
	cr.split(counts, start, start.Add(10*time.Second))
	if !cr.firstOK.IsZero() || cr.refused != 10 || cr.after.seconds != 0 {
		t.Errorf("firstOK %v, refused %d, after %+v: want never, 10, none", cr.firstOK, cr.refused, cr.after)
	}
	if c := checkNamed(t, chaosChecks(cr), "chaos: orders are placed again after the fault"); c.OK {
		t.Errorf("%s passed without a recovery", c.Name)
	}
}

// An order placed without a 201 passes only when a retry with its key found it.
func TestChaosRetryCheck(t *testing.T) {
	const name = "chaos: every order placed without a 201 answer is found by a retry with its key"
	us := []unanswered{{no: "A1"}, {no: "A2"}}
	for _, c := range []struct {
		bad  []string
		want bool
	}{{nil, true}, {[]string{`A2: 409 "" <nil>`}, false}} {
		cr := &chaosResult{created: []string{"B1"}, unanswered: us, retryBad: c.bad}
		if got := checkNamed(t, chaosChecks(cr), name); got.OK != c.want {
			t.Errorf("retry failures %q: %v (%s), want %v", c.bad, got.OK, got.Detail, c.want)
		}
	}
}

// The 201s are held against the product's stored orders: a number no order holds is missing
// (named twice, still one order), an order no 201 named is to be retried.
func TestSplit201s(t *testing.T) {
	stored := map[string]unanswered{"A": {no: "A"}, "B": {no: "B", key: "kb"}, "C": {no: "C"}}
	missing, without := split201s(stored, []string{"A", "C", "C", "X"})
	if len(missing) != 1 || missing[0] != "X" || len(without) != 1 || without[0].key != "kb" {
		t.Fatalf("missing %v, without a 201 %+v; want [X] and B", missing, without)
	}
}

func checkNamed(t *testing.T, cs []Check, name string) Check {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q", name)
	return Check{}
}

func TestWrkTimeouts(t *testing.T) {
	for line, want := range map[string]int64{
		"": 0,
		"Socket errors: connect 0, read 12, write 0, timeout 37":    37,
		"Socket errors: connect 3, read 0, write 0, timeout 0":      0,
		"Socket errors: connect 0, read 0, write 0, timeout 5, x 1": 5,
	} {
		if got := wrkTimeouts(line); got != want {
			t.Errorf("wrkTimeouts(%q) = %d, want %d", line, got, want)
		}
	}
}

// The addresses picked together for one set of servers are distinct.
func TestFreeAddrsDistinct(t *testing.T) {
	for range 50 {
		addrs, err := freeAddrs(4)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("address %s picked twice in %v", a, addrs)
			}
			seen[a] = true
		}
	}
}
