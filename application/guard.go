package application

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// BuyerCheck is what the bot defence looks at before an order is reserved: the buyer's IP
// address (as the driving adapter sees it), the e-mail address the buyer gave (empty when
// none) and the human-check token the buyer's browser got (empty when none).
type BuyerCheck struct {
	IP         string
	Email      string
	HumanToken string
}

// The reasons the guard counts (Refusals): the three blocklists' refusals, the human check's
// failures, the refusals while its provider cannot be reached (fail closed), and the buyers let
// through unchecked while it cannot (fail open).
const (
	RefusalBlockedIP        = "blocked_ip"
	RefusalBlockedEmail     = "blocked_email"
	RefusalBlockedDomain    = "blocked_domain"
	RefusalHumanFailed      = "human_failed"
	RefusalHumanUnavailable = "human_unavailable"
	RefusalHumanPassedOpen  = "human_passed_open" //nolint:gosec // G101: a metric label, no credential
)

// RefusalReasons lists every reason Refusals counts, in a fixed order.
func RefusalReasons() []string {
	return []string{RefusalBlockedIP, RefusalBlockedEmail, RefusalBlockedDomain, RefusalHumanFailed,
		RefusalHumanUnavailable, RefusalHumanPassedOpen}
}

// DefaultBlocklistEvery is Config.BlocklistEvery's default.
const DefaultBlocklistEvery = 3 * time.Second

// blocklistReadTimeout bounds one reload of the blocklists: it runs on behalf of every waiting
// request, so it does not end with the request that started it.
const blocklistReadTimeout = 5 * time.Second

// Guard is the bot defence in front of an order: the blocklists, then the human check when
// one is configured. It checks without a round trip per entry: each instance keeps an
// immutable compiled snapshot of the blocklists, reloaded from the ledger by a single flight
// at most every Config.BlocklistEvery (and at once after a change made through this Guard).
// It also manages the blocklists' entries for operators. Safe for concurrent use.
type Guard struct {
	ledger   domain.Ledger
	clock    domain.Clock
	human    domain.HumanCheck // nil: no human check
	failOpen bool
	every    time.Duration
	log      *slog.Logger

	snap      atomic.Pointer[blockSnapshot]
	checkedAt atomic.Int64  // unix nanoseconds of the last reload attempt, by the shop's clock
	gen       atomic.Uint64 // counts the changes made through this Guard

	mu     sync.Mutex
	flight *blockFlight // the reload under way, nil when none

	counts [6]atomic.Int64 // by the index of the reason in RefusalReasons
}

type blockFlight struct {
	done chan struct{}
	snap *blockSnapshot
	err  error
}

// newGuard returns the guard of an App.
func newGuard(cfg Config, d Deps) *Guard {
	return &Guard{ledger: d.Ledger, clock: d.Clock, human: d.HumanCheck, failOpen: cfg.HumanCheckFailOpen,
		every: cfg.BlocklistEvery, log: d.Logger}
}

// HumanWidget is the widget an order form shows, and false when no human check is configured
// (the form then shows none and Check asks for no token).
func (g *Guard) HumanWidget() (domain.HumanWidget, bool) {
	if g.human == nil {
		return domain.HumanWidget{}, false
	}
	return g.human.Widget(), true
}

// Check decides whether the buyer may place an order: the blocklists first (from memory: the
// IP address, then the e-mail address, then its domain and each parent domain), then the human
// check when one is configured. Every refusal is counted (Refusals).
//
// Errors: ErrBlocked (which list matched is logged and counted, never told), ErrHumanCheckFailed,
// ErrHumanCheckUnavailable (the provider cannot be reached and the shop refuses then; when it
// lets buyers through instead, Check returns nil and counts them), ErrUnavailable when the
// blocklists could never be read yet.
func (g *Guard) Check(ctx context.Context, b BuyerCheck) error {
	if err := g.checkLists(ctx, b.IP, b.Email); err != nil {
		return err
	}
	if g.human == nil {
		return nil
	}
	v, err := g.human.Verify(ctx, b.HumanToken, b.IP)
	switch {
	case err != nil && g.failOpen:
		g.count(RefusalHumanPassedOpen)
		g.log.WarnContext(ctx, "human check unavailable: buyer let through unchecked", "err", err)
		return nil
	case err != nil:
		g.count(RefusalHumanUnavailable)
		g.log.WarnContext(ctx, "human check unavailable: buyer refused", "err", err)
		return fmt.Errorf("guard: %w", errors.Join(domain.ErrHumanCheckUnavailable, err))
	case !v.Success:
		g.count(RefusalHumanFailed)
		g.log.InfoContext(ctx, "human check failed", "codes", strings.Join(v.Codes, ","))
		return fmt.Errorf("guard: %w", domain.ErrHumanCheckFailed)
	}
	return nil
}

// CheckIP is Check of the IP blocklist alone: for a door whose buyers give no e-mail address
// and solve no human check (the API's orders, placed by a storefront's server for its buyer).
//
// Errors: ErrBlocked, ErrUnavailable when the blocklists could never be read yet.
func (g *Guard) CheckIP(ctx context.Context, ip string) error { return g.checkLists(ctx, ip, "") }

// checkLists refuses a blocked address, e-mail address or e-mail domain; an IP or an e-mail
// address that does not parse matches nothing (the adapters validate what they accept).
func (g *Guard) checkLists(ctx context.Context, ip, email string) error {
	s, err := g.blocklists(ctx, 0)
	if err != nil {
		return err
	}
	reason, entry := s.match(ip, email)
	if reason == "" {
		return nil
	}
	g.count(reason)
	g.log.InfoContext(ctx, "buyer refused by a blocklist", "reason", reason, "entry", entry)
	return fmt.Errorf("guard: %w", domain.ErrBlocked)
}

// count adds one to a reason's counter.
func (g *Guard) count(reason string) {
	for i, r := range RefusalReasons() {
		if r == reason {
			g.counts[i].Add(1)
			return
		}
	}
}

// Refusals returns this instance's counts since start, by reason (every reason of
// RefusalReasons, zero included).
func (g *Guard) Refusals() map[string]int64 {
	out := make(map[string]int64, len(g.counts))
	for i, r := range RefusalReasons() {
		out[r] = g.counts[i].Load()
	}
	return out
}

// Blocklist lists every entry, read from the ledger (for operators: never on the hot path).
//
// Errors: ErrUnavailable.
func (g *Guard) Blocklist(ctx context.Context) ([]domain.BlockEntry, error) {
	es, err := g.ledger.Blocklist().Entries(ctx)
	if err != nil {
		return nil, fmt.Errorf("blocklist: %w", err)
	}
	return es, nil
}

// AddBlock adds an entry on behalf of the operator by; when it returns, this instance's Check
// applies it (other instances within Config.BlocklistEvery).
//
// Errors: ErrInvalidBlockEntry (nothing stored), ErrBlockExists, ErrUnavailable.
func (g *Guard) AddBlock(ctx context.Context, by domain.OperatorName, kind, value, note string) (domain.BlockEntry, error) {
	e, err := domain.NewBlockEntry(kind, value, note, by, g.clock.Now())
	if err != nil {
		return domain.BlockEntry{}, err
	}
	e, err = g.ledger.Blocklist().Add(ctx, e)
	if err != nil {
		return domain.BlockEntry{}, fmt.Errorf("add to the blocklist: %w", err)
	}
	g.changed(ctx)
	return e, nil
}

// RemoveBlock removes the entry id and returns it; when it returns, this instance's Check no
// longer applies it (other instances within Config.BlocklistEvery).
//
// Errors: ErrBlockNotFound, ErrUnavailable.
func (g *Guard) RemoveBlock(ctx context.Context, id int64) (domain.BlockEntry, error) {
	e, err := g.ledger.Blocklist().Remove(ctx, id)
	if err != nil {
		return domain.BlockEntry{}, fmt.Errorf("remove from the blocklist: %w", err)
	}
	g.changed(ctx)
	return e, nil
}

// changed makes this instance's snapshot follow a change it committed: it waits for a reload
// that started after the change. A reload that fails leaves the snapshot stale, so the next
// Check tries again; the change itself stands.
func (g *Guard) changed(ctx context.Context) {
	want := g.gen.Add(1)
	if _, err := g.blocklists(ctx, want); err != nil {
		g.log.WarnContext(ctx, "blocklist reload after a change failed; the next check retries", "err", err)
	}
}

// blocklists returns the compiled snapshot, reloading it first with a single flight when it is
// older than the reload interval, or was read before this instance's latest change; the
// callers that find a reload under way answer from the snapshot they have (wait only when
// there is none yet). With atLeast > 0 the call waits for a snapshot whose read started after
// change number atLeast.
func (g *Guard) blocklists(ctx context.Context, atLeast uint64) (*blockSnapshot, error) {
	for {
		now := g.clock.Now()
		snap := g.snap.Load()
		if g.fresh(snap, now, atLeast) {
			return snap, nil
		}
		g.mu.Lock()
		if snap = g.snap.Load(); g.fresh(snap, now, atLeast) {
			g.mu.Unlock()
			return snap, nil
		}
		if f := g.flight; f != nil {
			g.mu.Unlock()
			if snap != nil && atLeast == 0 {
				return snap, nil
			}
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil {
				return nil, f.err
			}
			if atLeast == 0 {
				return f.snap, nil
			}
			continue // the flight may have started before change atLeast: look again
		}
		f := &blockFlight{done: make(chan struct{})}
		g.flight = f
		g.mu.Unlock()

		f.snap, f.err = g.reload(ctx, now)
		g.mu.Lock()
		g.checkedAt.Store(now.UnixNano())
		if f.err == nil {
			g.snap.Store(f.snap)
		}
		g.flight = nil
		g.mu.Unlock()
		close(f.done)
		if f.err != nil {
			g.log.WarnContext(ctx, "blocklist reload failed; the last snapshot is served", "err", f.err)
			if snap != nil {
				return snap, nil
			}
			return nil, f.err
		}
		if atLeast == 0 || f.snap.gen >= atLeast {
			return f.snap, nil
		}
	}
}

// fresh reports whether snap may be served at now: read within the interval, after this
// instance's latest change, and after change atLeast.
func (g *Guard) fresh(snap *blockSnapshot, now time.Time, atLeast uint64) bool {
	if snap == nil || snap.gen < atLeast {
		return false
	}
	if atLeast > 0 {
		return true
	}
	return snap.gen == g.gen.Load() && now.UnixNano()-g.checkedAt.Load() < int64(g.every)
}

// reload reads every entry and compiles them. The change counter is read before the ledger:
// a snapshot never claims a change it may not hold.
func (g *Guard) reload(ctx context.Context, now time.Time) (*blockSnapshot, error) {
	gen := g.gen.Load()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), blocklistReadTimeout)
	defer cancel()
	es, err := g.ledger.Blocklist().Entries(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the blocklists: %w", err)
	}
	s := compileBlocklists(es)
	s.gen, s.readAt = gen, now
	return s, nil
}

// blockSnapshot is the blocklists compiled for matching, never changed once published: the
// single addresses in a set, the ranges in one set per prefix length (a match costs one look-up
// per length in use), e-mail addresses and domains in sets.
type blockSnapshot struct {
	gen     uint64
	readAt  time.Time
	entries int

	addrs   map[netip.Addr]string // address -> the entry's value
	ranges  map[int]map[netip.Prefix]string
	lengths []int // the prefix lengths of ranges, longest first
	emails  map[string]struct{}
	domains map[string]struct{}
}

// compileBlocklists builds a snapshot of es; an entry that no longer parses (written by a
// newer version) is skipped.
func compileBlocklists(es []domain.BlockEntry) *blockSnapshot {
	s := &blockSnapshot{entries: len(es), addrs: map[netip.Addr]string{}, ranges: map[int]map[netip.Prefix]string{},
		emails: map[string]struct{}{}, domains: map[string]struct{}{}}
	for _, e := range es {
		switch e.Kind {
		case domain.BlockIP:
			p, err := domain.ParseBlockPrefix(e.Value)
			if err != nil {
				continue
			}
			if p.IsSingleIP() {
				s.addrs[p.Addr()] = e.Value
				continue
			}
			if s.ranges[p.Bits()] == nil {
				s.ranges[p.Bits()] = map[netip.Prefix]string{}
				s.lengths = append(s.lengths, p.Bits())
			}
			s.ranges[p.Bits()][p] = e.Value
		case domain.BlockEmail:
			s.emails[e.Value] = struct{}{}
		case domain.BlockEmailDomain:
			s.domains[e.Value] = struct{}{}
		}
	}
	return s
}

// match returns the reason and the entry that block ip or email, or "" when none does.
func (s *blockSnapshot) match(ip, email string) (reason, entry string) {
	if a, err := netip.ParseAddr(strings.TrimSpace(ip)); err == nil {
		a = a.Unmap().WithZone("")
		if v, ok := s.addrs[a]; ok {
			return RefusalBlockedIP, v
		}
		for _, bits := range s.lengths {
			p, err := a.Prefix(bits)
			if err != nil {
				continue // an IPv4 address and an IPv6 length, or the reverse
			}
			if v, ok := s.ranges[bits][p]; ok {
				return RefusalBlockedIP, v
			}
		}
	}
	e, ok := domain.NormaliseBlockEmail(email)
	if !ok {
		return "", ""
	}
	if _, ok := s.emails[e]; ok {
		return RefusalBlockedEmail, e
	}
	_, d, _ := strings.Cut(e, "@")
	for {
		if _, ok := s.domains[d]; ok {
			return RefusalBlockedDomain, d
		}
		_, parent, more := strings.Cut(d, ".")
		if !more || parent == "" {
			return "", ""
		}
		d = parent
	}
}
