package httpapi

import (
	"cardshop/adapters/webkit"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// RateLimits configures the rate limits of the buyer API. A zero limit is off; with both off
// the Limiter is never called. A refused request answers 429 "rate_limited" with Retry-After
// and reaches no handler.
//
// PerIP applies to every /api route except the payment callback: providers retry callbacks
// in bursts from a few addresses, and each one is authenticated by its HMAC signature anyway.
// /admin (admin token) and /healthz are not limited. The IP is webkit.ClientIP: the peer's
// address, or, when the peer is one of Config.TrustedProxies, the client it forwarded in
// X-Forwarded-For; behind a load balancer that is not trusted every buyer shares its budget.
//
// PerBuyer applies to POST /api/order, after the buyer's token is verified (so an invalid
// token cannot spend a real buyer's budget) and the body is read, counting replays of an
// idempotency key too. It is charged to every order that can reserve; an order the service
// answers from memory is answered first, without a charge: a body that does not parse, and
// the refusals of application.Sales.RefusedFromMemory (sold out under the gate's lease, a
// sale clearly not started), which cost less than the limiter's check and reserve nothing.
//
// With adapters/ratelimit, n per Window means a burst of n, then one every Window/n.
//
// When the Limiter fails (Redis down), the request is let through and a warning logged (at
// most one every 10 s, counting those held back): selling beats rate limiting, and a limiter
// outage must not become a shop outage.
type RateLimits struct {
	PerIP    int           // requests per Window per client IP on /api; 0 = off
	PerBuyer int           // orders per Window per buyer; 0 = off
	Window   time.Duration // the window both limits are counted over
	Limiter  webkit.Limiter
}

func (r RateLimits) enabled() bool { return r.PerIP > 0 || r.PerBuyer > 0 }

// check panics on a configuration that would silently not limit: a programming error of the
// wiring, caught at start.
func (r RateLimits) check() {
	if r.enabled() && (r.Limiter == nil || r.Window <= 0) {
		panic("httpapi: RateLimits with a limit needs a Limiter and a positive Window")
	}
}

// limiterWarnEvery bounds the warnings of a failing limiter: under a Redis outage every request
// would log one, at flash-sale rates a flood that costs more than the outage.
const limiterWarnEvery = 10 * time.Second

// limiterWarnings throttles the warnings of a failing limiter.
type limiterWarnings struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// limitIP charges the request to its client IP (see RateLimits.PerIP), a middleware.
func (s *Server) limitIP(c *fiber.Ctx) error {
	if err := s.charge(c, "ip", s.cfg.RateLimits.PerIP, func() string { return "ip:" + webkit.ClientIP(c) }); err != nil {
		return err
	}
	return c.Next()
}

// chargeBuyer charges an order to its buyer (see RateLimits.PerBuyer); placeOrder calls it
// after s.buyer verified the token and after the answers it gives from memory.
func (s *Server) chargeBuyer(c *fiber.Ctx) error {
	return s.charge(c, "buyer", s.cfg.RateLimits.PerBuyer, func() string { return "buyer:" + string(buyerOf(c)) })
}

// charge charges the request to key's budget: nil when it may go on (the limit is off, the
// budget allows it, or the limiter failed), else the 429 with Retry-After.
func (s *Server) charge(c *fiber.Ctx, kind string, limit int, key func() string) error {
	if limit <= 0 {
		return nil
	}
	ok, retry, err := s.cfg.RateLimits.Limiter.Allow(c.UserContext(), key(), limit, s.cfg.RateLimits.Window)
	if err != nil {
		s.warnLimiterFailed(c, kind, err)
		return nil // fail open: see RateLimits
	}
	if !ok {
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(retryAfterSeconds(retry), 10))
		return webkit.ErrRateLimited
	}
	return nil
}

// retryAfterSeconds is d in whole seconds, rounded up (Retry-After has no fractions, and a
// client that comes back early is refused again), at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

func (s *Server) warnLimiterFailed(c *fiber.Ctx, kind string, err error) {
	w := &s.limiterWarnings
	now := s.clock.Now()
	w.mu.Lock()
	if !w.last.IsZero() && now.Sub(w.last) < limiterWarnEvery {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	suppressed := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	s.log.WarnContext(c.UserContext(), "rate limiter failed; request let through", "request_id", requestID(c),
		"limit", kind, "err", err.Error(), "suppressed_since_last", suppressed)
}
