package main

import (
	"slices"
	"testing"
	"time"
)

func TestBootApps(t *testing.T) {
	got := bootApps([]string{"amqp_client-3.10.8", "ra-2.2.0", "rabbit-3.10.8", "rabbit_common-3.10.8",
		"rabbitmq_management-3.10.8", "rabbitmq_prelaunch-3.10.8", "rabbitmq_web_stomp-3.10.8"})
	want := []string{"amqp_client-3.10.8", "ra-2.2.0", "rabbit-3.10.8", "rabbit_common-3.10.8", "rabbitmq_prelaunch-3.10.8"}
	if !slices.Equal(got, want) {
		t.Errorf("bootApps = %v, want %v", got, want)
	}
}

// The node was killed at 0 and answered again 10 s later; the bound is 3 s.
func TestSummarizeCloses(t *testing.T) {
	s := time.Second
	orders := []closedOrder{
		{created: -9 * s, due: -4 * s, late: s / 2},     // usual: scheduled and due before the kill
		{created: -3 * s, due: 2 * s, late: 2 * s},      // queued at the kill, closed at 4 s
		{created: -1 * s, due: 4 * s, late: 7 * s},      // queued, closed at 11 s: late
		{created: 2 * s, due: 7 * s, late: 1 * s},       // scheduled while down, closed at 8 s
		{created: 12 * s, due: 17 * s, late: s / 10},    // after, closed at 17.1 s
		{created: 30 * s, due: 35 * s, late: 4*s + 1e6}, // after, closed past the rate window: late
	}
	nos := []string{"a", "b", "c", "d", "e", "f"}
	got := summarizeCloses(orders, nos, 10*s, 3*s)
	if got.n != 6 || got.usual.n != 1 || got.queued.n != 2 || got.unscheduled.n != 1 || got.after.n != 2 {
		t.Errorf("groups: n %d usual %d queued %d unscheduled %d after %d, want 6 1 2 1 2",
			got.n, got.usual.n, got.queued.n, got.unscheduled.n, got.after.n)
	}
	if got.queued.latest != 7*s || got.after.latest != 4*s+1e6 {
		t.Errorf("latest: queued %s after %s", got.queued.latest, got.after.latest)
	}
	if got.over != 2 || !slices.Equal(got.overEx, []string{"c 7s late", "f 4s late"}) {
		t.Errorf("over %d %v, want c and f", got.over, got.overEx)
	}
	if got.closedDown != 2 || got.closedBack != 2 {
		t.Errorf("closed while down %d, in the window after %d; want 2 and 2", got.closedDown, got.closedBack)
	}
	if g := (lateGroup{}); g.String() != "none" {
		t.Errorf("empty group = %q", g.String())
	}
}

func TestMissingFrom(t *testing.T) {
	missing, extra := missingFrom([]string{"a", "b", "c"}, map[string]int{"a": 1, "c": 3, "z": 2})
	if !slices.Equal(missing, []string{"b"}) || extra != 3 {
		t.Errorf("missing %v extra %d, want [b] and 3", missing, extra)
	}
}

func TestSQLTime(t *testing.T) {
	at := time.Date(2026, 12, 3, 11, 4, 5, 123456789, time.FixedZone("CET", 3600))
	if got := sqlTime(at); got != "2026-12-03 10:04:05.123456" {
		t.Errorf("sqlTime = %q", got)
	}
}
