package application_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cardshop/adapters/memory"
	"cardshop/adapters/paysig"
	"cardshop/application"
	"cardshop/domain"
)

// stubHuman is a HumanCheck that answers what it is told and counts its calls.
type stubHuman struct {
	verdict domain.HumanVerdict
	err     error
	calls   atomic.Int64
}

func (h *stubHuman) Widget() domain.HumanWidget {
	return domain.HumanWidget{Provider: "turnstile", SiteKey: "stub-site-key"}
}

func (h *stubHuman) Verify(_ context.Context, token, _ string) (domain.HumanVerdict, error) {
	h.calls.Add(1)
	if h.err != nil {
		return domain.HumanVerdict{}, h.err
	}
	v := h.verdict
	v.Success = v.Success && token != ""
	return v, nil
}

// downBlocklistLedger fails every blocklist read while down is set.
type downBlocklistLedger struct {
	domain.Ledger
	down atomic.Bool
}

func (l *downBlocklistLedger) Blocklist() domain.BlocklistRepo {
	return downBlocklist{l.Ledger.Blocklist(), &l.down}
}

type downBlocklist struct {
	domain.BlocklistRepo
	down *atomic.Bool
}

func (b downBlocklist) Entries(ctx context.Context) ([]domain.BlockEntry, error) {
	if b.down.Load() {
		return nil, fmt.Errorf("blocklist: %w", domain.ErrUnavailable)
	}
	return b.BlocklistRepo.Entries(ctx)
}

// newGuardApp is an App on ledger and clock with the human check h (nil: none).
func newGuardApp(t *testing.T, ledger domain.Ledger, clock domain.Clock, h domain.HumanCheck, failOpen bool) *application.App {
	t.Helper()
	signer, err := paysig.New(testSecret, paysig.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	q := memory.NewDelayQueue(clock)
	t.Cleanup(q.Close)
	cfg := application.DefaultConfig()
	cfg.HumanCheckFailOpen = failOpen
	app, err := application.New(cfg, application.Deps{Ledger: ledger, Gate: memory.NewGate(clock), Queue: q,
		Publisher: memory.NewPublisher(), Verifier: signer, Alerter: memory.NewAlerts(quiet), HumanCheck: h,
		Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func addBlock(t *testing.T, g *application.Guard, kind, value string) domain.BlockEntry {
	t.Helper()
	e, err := g.AddBlock(t.Context(), "op", kind, value, "test")
	if err != nil {
		t.Fatalf("AddBlock(%s, %s): %v", kind, value, err)
	}
	return e
}

// TestGuardBlocksByEveryList: an address, IPv4 and IPv6 ranges, an e-mail address, a domain
// and its subdomains are refused with ErrBlocked and counted by list; their neighbours pass.
func TestGuardBlocksByEveryList(t *testing.T) {
	g := newGuardApp(t, memory.NewLedger(), memory.NewFakeClock(t0), nil, false).Guard
	addBlock(t, g, "ip", "203.0.113.7")
	addBlock(t, g, "ip", "198.51.100.0/24")
	addBlock(t, g, "ip", "2001:db8:bad::/48")
	addBlock(t, g, "email", "Bot@Example.com")
	addBlock(t, g, "email_domain", "mailinator.com")
	for _, c := range []struct {
		b      application.BuyerCheck
		reason string // "" passes
	}{
		{application.BuyerCheck{IP: "203.0.113.7"}, application.RefusalBlockedIP},
		{application.BuyerCheck{IP: "::ffff:203.0.113.7"}, application.RefusalBlockedIP},
		{application.BuyerCheck{IP: "203.0.113.8"}, ""},
		{application.BuyerCheck{IP: "198.51.100.200"}, application.RefusalBlockedIP},
		{application.BuyerCheck{IP: "198.51.101.1"}, ""},
		{application.BuyerCheck{IP: "2001:db8:bad:1::42"}, application.RefusalBlockedIP},
		{application.BuyerCheck{IP: "2001:db8:bae::1"}, ""},
		{application.BuyerCheck{IP: "10.0.0.1", Email: " bot@EXAMPLE.com"}, application.RefusalBlockedEmail},
		{application.BuyerCheck{IP: "10.0.0.1", Email: "human@example.com"}, ""},
		{application.BuyerCheck{IP: "10.0.0.1", Email: "x@mailinator.com"}, application.RefusalBlockedDomain},
		{application.BuyerCheck{IP: "10.0.0.1", Email: "x@eu.mail.MAILINATOR.com"}, application.RefusalBlockedDomain},
		{application.BuyerCheck{IP: "10.0.0.1", Email: "x@notmailinator.com"}, ""},
		{application.BuyerCheck{IP: "not an ip", Email: "not an address"}, ""},
	} {
		before := g.Refusals()
		err := g.Check(t.Context(), c.b)
		if c.reason == "" {
			if err != nil {
				t.Errorf("Check(%+v) = %v, want it to pass", c.b, err)
			}
			continue
		}
		if !errors.Is(err, domain.ErrBlocked) {
			t.Errorf("Check(%+v) = %v, want ErrBlocked", c.b, err)
		}
		after := g.Refusals()
		for _, r := range application.RefusalReasons() {
			want := before[r]
			if r == c.reason {
				want++
			}
			if after[r] != want {
				t.Errorf("Check(%+v): %s counted %d, want %d", c.b, r, after[r], want)
			}
		}
	}
	if err := g.CheckIP(t.Context(), "198.51.100.9"); !errors.Is(err, domain.ErrBlocked) {
		t.Fatalf("CheckIP of a blocked range = %v, want ErrBlocked", err)
	}
	if err := g.CheckIP(t.Context(), "192.0.2.1"); err != nil {
		t.Fatalf("CheckIP of a free address = %v", err)
	}
}

// TestGuardBadEntriesChangeNothing: a bad entry and a second entry of one value are refused
// with their errors and the blocklist stays as it was.
func TestGuardBadEntriesChangeNothing(t *testing.T) {
	g := newGuardApp(t, memory.NewLedger(), memory.NewFakeClock(t0), nil, false).Guard
	kept := addBlock(t, g, "ip", "10.1.0.0/16")
	for _, c := range []struct {
		kind, value string
		want        error
	}{
		{"ip", "10.1.2.3/40", domain.ErrInvalidBlockEntry},
		{"nope", "x", domain.ErrInvalidBlockEntry},
		{"email", "nobody", domain.ErrInvalidBlockEntry},
		{"ip", "10.1.9.9/16", domain.ErrBlockExists}, // the same range, spelt otherwise
	} {
		if _, err := g.AddBlock(t.Context(), "op", c.kind, c.value, ""); !errors.Is(err, c.want) {
			t.Errorf("AddBlock(%s, %s) = %v, want %v", c.kind, c.value, err, c.want)
		}
	}
	if _, err := g.RemoveBlock(t.Context(), kept.ID+100); !errors.Is(err, domain.ErrBlockNotFound) {
		t.Errorf("RemoveBlock of an unknown id = %v, want ErrBlockNotFound", err)
	}
	es, err := g.Blocklist(t.Context())
	if err != nil || len(es) != 1 || es[0] != kept {
		t.Fatalf("Blocklist = %+v, %v; want only %+v", es, err, kept)
	}
}

// TestGuardChangeReachesAnotherAppWithinTheInterval: an entry added through one App blocks
// there at once, and through another App on the same ledger once its snapshot is older than
// BlocklistEvery (not before: no ledger read per check); a removal travels alike.
func TestGuardChangeReachesAnotherAppWithinTheInterval(t *testing.T) {
	ledger := memory.NewLedger()
	clock := memory.NewFakeClock(t0)
	a := newGuardApp(t, ledger, clock, nil, false).Guard
	b := newGuardApp(t, ledger, clock, nil, false).Guard
	buyer := application.BuyerCheck{IP: "192.0.2.55", Email: "someone@example.org"}
	for _, g := range []*application.Guard{a, b} {
		if err := g.Check(t.Context(), buyer); err != nil {
			t.Fatalf("Check before any entry: %v", err)
		}
	}
	e := addBlock(t, a, "email_domain", "example.org")
	if err := a.Check(t.Context(), buyer); !errors.Is(err, domain.ErrBlocked) {
		t.Fatalf("the App that added the entry: Check = %v, want ErrBlocked at once", err)
	}
	if err := b.Check(t.Context(), buyer); err != nil {
		t.Fatalf("the other App within the interval: Check = %v, want its snapshot's answer (pass)", err)
	}
	clock.Advance(application.DefaultBlocklistEvery)
	if err := b.Check(t.Context(), buyer); !errors.Is(err, domain.ErrBlocked) {
		t.Fatalf("the other App after the interval: Check = %v, want ErrBlocked", err)
	}
	if err := a.Check(t.Context(), buyer); !errors.Is(err, domain.ErrBlocked) { // a's snapshot is read again now
		t.Fatalf("the first App: Check = %v, want ErrBlocked", err)
	}
	if _, err := b.RemoveBlock(t.Context(), e.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(t.Context(), buyer); err != nil {
		t.Fatalf("the App that removed the entry: Check = %v, want a pass at once", err)
	}
	if err := a.Check(t.Context(), buyer); !errors.Is(err, domain.ErrBlocked) {
		t.Fatalf("the first App within the interval: Check = %v, want its snapshot's ErrBlocked", err)
	}
	clock.Advance(application.DefaultBlocklistEvery)
	if err := a.Check(t.Context(), buyer); err != nil {
		t.Fatalf("the first App after the interval: Check = %v, want a pass", err)
	}
}

// TestGuardKeepsItsSnapshotWhenTheLedgerFails: a failed reload serves the last snapshot; with
// none yet, Check is ErrUnavailable (never a silent pass).
func TestGuardKeepsItsSnapshotWhenTheLedgerFails(t *testing.T) {
	ledger := &downBlocklistLedger{Ledger: memory.NewLedger()}
	clock := memory.NewFakeClock(t0)
	g := newGuardApp(t, ledger, clock, nil, false).Guard
	ledger.down.Store(true)
	if err := g.Check(t.Context(), application.BuyerCheck{IP: "192.0.2.1"}); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Check with no snapshot and the ledger down = %v, want ErrUnavailable", err)
	}
	ledger.down.Store(false)
	addBlock(t, g, "ip", "192.0.2.1")
	ledger.down.Store(true)
	clock.Advance(10 * application.DefaultBlocklistEvery)
	if err := g.Check(t.Context(), application.BuyerCheck{IP: "192.0.2.1"}); !errors.Is(err, domain.ErrBlocked) {
		t.Fatalf("Check with an old snapshot and the ledger down = %v, want the snapshot's ErrBlocked", err)
	}
}

// TestGuardHumanCheck: the blocklist comes first (a blocked buyer costs no provider call); a
// failed verdict is ErrHumanCheckFailed; an unreachable provider is ErrHumanCheckUnavailable
// when the shop fails closed, a counted pass when it fails open.
func TestGuardHumanCheck(t *testing.T) {
	ok := &stubHuman{verdict: domain.HumanVerdict{Success: true}}
	g := newGuardApp(t, memory.NewLedger(), memory.NewFakeClock(t0), ok, false).Guard
	if w, on := g.HumanWidget(); !on || w.SiteKey != "stub-site-key" {
		t.Fatalf("HumanWidget = %+v, %v; want the check's widget", w, on)
	}
	if _, on := newGuardApp(t, memory.NewLedger(), memory.NewFakeClock(t0), nil, false).Guard.HumanWidget(); on {
		t.Fatal("HumanWidget without a human check says it is on")
	}
	addBlock(t, g, "ip", "203.0.113.1")
	if err := g.Check(t.Context(), application.BuyerCheck{IP: "203.0.113.1", HumanToken: "t"}); !errors.Is(err, domain.ErrBlocked) {
		t.Fatalf("blocked buyer: %v", err)
	}
	if ok.calls.Load() != 0 {
		t.Fatalf("a blocked buyer cost %d provider calls, want 0", ok.calls.Load())
	}
	if err := g.Check(t.Context(), application.BuyerCheck{IP: "203.0.113.2", HumanToken: "t"}); err != nil {
		t.Fatalf("a human: %v", err)
	}
	if err := g.Check(t.Context(), application.BuyerCheck{IP: "203.0.113.2"}); !errors.Is(err, domain.ErrHumanCheckFailed) {
		t.Fatalf("no token: %v, want ErrHumanCheckFailed", err)
	}

	down := &stubHuman{err: fmt.Errorf("siteverify: %w", domain.ErrHumanCheckUnavailable)}
	closed := newGuardApp(t, memory.NewLedger(), memory.NewFakeClock(t0), down, false).Guard
	if err := closed.Check(t.Context(), application.BuyerCheck{IP: "192.0.2.9", HumanToken: "t"}); !errors.Is(err, domain.ErrHumanCheckUnavailable) {
		t.Fatalf("fail closed: %v, want ErrHumanCheckUnavailable", err)
	}
	open := newGuardApp(t, memory.NewLedger(), memory.NewFakeClock(t0), down, true).Guard
	if err := open.Check(t.Context(), application.BuyerCheck{IP: "192.0.2.9", HumanToken: "t"}); err != nil {
		t.Fatalf("fail open: %v, want a pass", err)
	}
	for _, c := range []struct {
		g      *application.Guard
		reason string
		want   int64
	}{
		{g, application.RefusalHumanFailed, 1}, {g, application.RefusalBlockedIP, 1},
		{closed, application.RefusalHumanUnavailable, 1}, {closed, application.RefusalHumanPassedOpen, 0},
		{open, application.RefusalHumanPassedOpen, 1}, {open, application.RefusalHumanUnavailable, 0},
	} {
		if got := c.g.Refusals()[c.reason]; got != c.want {
			t.Errorf("%s counted %d, want %d", c.reason, got, c.want)
		}
	}
}

// TestGuardChecksWhileEntriesChange drives Check from many goroutines while entries are added
// and removed (run with -race): an address blocked throughout is refused by every check, one
// never blocked passes every check, and an entry whose AddBlock has returned refuses every
// later check on the same App until it is removed. A snapshot half built would break one of
// these.
func TestGuardChecksWhileEntriesChange(t *testing.T) {
	g := newGuardApp(t, memory.NewLedger(), memory.SystemClock{}, nil, false).Guard
	addBlock(t, g, "ip", "198.51.100.0/24")
	addBlock(t, g, "email_domain", "spam.example")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var checks atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				checks.Add(1)
				if err := g.Check(ctx, application.BuyerCheck{IP: fmt.Sprintf("198.51.100.%d", i%256)}); !errors.Is(err, domain.ErrBlocked) {
					t.Errorf("worker %d: an address of the standing range passed: %v", w, err)
					return
				}
				if err := g.Check(ctx, application.BuyerCheck{IP: "192.0.2.200", Email: fmt.Sprintf("w%d@ok.example", w)}); err != nil {
					t.Errorf("worker %d: a never-blocked buyer was refused: %v", w, err)
					return
				}
				if err := g.Check(ctx, application.BuyerCheck{IP: "10.9.9.9", Email: fmt.Sprintf("x@%d.spam.example", i)}); !errors.Is(err, domain.ErrBlocked) {
					t.Errorf("worker %d: a subdomain of the standing domain passed: %v", w, err)
					return
				}
			}
		})
	}
	for i := 0; ctx.Err() == nil; i++ {
		ip := fmt.Sprintf("203.0.113.%d", i%200)
		e, err := g.AddBlock(ctx, "op", "ip", ip, "")
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.Fatalf("AddBlock: %v", err)
		}
		if err := g.Check(ctx, application.BuyerCheck{IP: ip}); !errors.Is(err, domain.ErrBlocked) && ctx.Err() == nil {
			t.Fatalf("an entry just added passed on its own App: %v", err)
		}
		if _, err := g.RemoveBlock(context.WithoutCancel(ctx), e.ID); err != nil {
			t.Fatalf("RemoveBlock: %v", err)
		}
		if err := g.Check(ctx, application.BuyerCheck{IP: ip}); err != nil && ctx.Err() == nil {
			t.Fatalf("an entry just removed still refused on its own App: %v", err)
		}
	}
	wg.Wait()
	if checks.Load() == 0 {
		t.Fatal("no check ran")
	}
}
