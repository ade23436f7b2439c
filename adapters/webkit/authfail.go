package webkit

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// The audit actions of refused authentications. They are no operator's acts: their entries
// name no operator, and target the operator a token claimed ("operator olga"), if any.
const (
	ActionAuthFailed       = "admin.auth_failed"          // an /admin request without a valid token
	ActionLoginFailed      = "console.login_failed"       // a console login with a bad token
	ActionLoginRateLimited = "console.login_rate_limited" // a console login over the per-IP limit
	// ActionAuthUnrecorded counts the refusals that the bounds below kept out of the audit log
	// (and the log): at most one entry per instance and window.
	ActionAuthUnrecorded = "auth.unrecorded"
)

// AuthFailuresPerInstance bounds the entries AuthFailures writes per AuthFailureWindow on one
// instance, whatever the number of addresses: an anonymous flood from many addresses (or with
// the limiter down) cannot grow the audit table faster than that.
const (
	AuthFailuresPerInstance = 100
	AuthFailureWindow       = time.Minute
)

// AuthFailures records refused authentications of operators — the admin API's bad tokens, the
// console's failed and rate-limited logins — as a warning in the log and an entry in the audit
// log, with the client's address and the operator name the token claimed
// (application.TokenName: the part before the dot of an operator-shaped token), never any
// part of a secret. Anyone can send a bad token, so what gets written is bounded twice: per
// client address and kind, at most the caller's perIP per window, counted through the
// Limiter (in Redis with the real adapters, so across instances; nil: no per-address bound);
// and per instance at most AuthFailuresPerInstance per window, a fixed count in memory that
// holds even when the Limiter cannot decide. Refusals past a bound are counted, and the next
// refusal recorded writes their count too (ActionAuthUnrecorded), at most once a window. It is
// safe for concurrent use.
type AuthFailures struct {
	admin   *application.Admin
	limiter Limiter
	now     func() time.Time
	log     *slog.Logger

	mu       sync.Mutex
	window   time.Time // the start of the instance's current window
	written  int       // entries written in it
	reported bool      // whether it wrote the count of unrecorded refusals
	dropped  int       // refusals not recorded since that count was last written
}

// NewAuthFailures returns the recorder of refused authentications; limiter may be nil.
func NewAuthFailures(admin *application.Admin, limiter Limiter, clock domain.Clock, log *slog.Logger) *AuthFailures {
	if log == nil {
		log = slog.Default()
	}
	return &AuthFailures{admin: admin, limiter: limiter, now: clock.Now, log: log}
}

// Refused records one refused authentication of kind action from the request's client, with
// the token that was refused (only its name part is kept) and its result ("401
// unauthorized"), within the bounds: perIP entries per address and kind per window.
func (a *AuthFailures) Refused(c *fiber.Ctx, action, token, result string, perIP int) {
	ctx, ip := c.UserContext(), ClientIP(c)
	target, claimed := "", ""
	if n, ok := application.TokenName(token); ok {
		claimed, target = string(n), "operator "+string(n)
	}
	record, unrecorded := a.take(a.withinIP(ctx, action, ip, perIP))
	if unrecorded > 0 {
		a.log.WarnContext(ctx, "refused authentications not recorded", "count", unrecorded)
		b, _ := json.Marshal(map[string]int{"count": unrecorded}) // an integer always encodes
		a.append(ctx, domain.AuditEntry{Action: ActionAuthUnrecorded, Params: string(b)})
	}
	if !record {
		return
	}
	a.log.WarnContext(ctx, "authentication refused", "action", action, "claimed_operator", claimed,
		"token_given", token != "", "client_addr", ip, "path", c.Path(), "result", result)
	a.append(ctx, domain.AuditEntry{Action: action, Target: target, Result: result, ClientAddr: ip})
}

// withinIP charges the refusal to the address's budget for its kind. A limiter that cannot
// decide lets it through: the instance bound still holds.
func (a *AuthFailures) withinIP(ctx context.Context, action, ip string, perIP int) bool {
	if a.limiter == nil || perIP <= 0 {
		return true
	}
	ok, _, err := a.limiter.Allow(ctx, "auth-audit:"+action+":"+ip, perIP, AuthFailureWindow)
	return ok || err != nil
}

// take decides whether a refusal is recorded: within its address's bound and the instance's.
// One not recorded is counted; the count is handed back (unrecorded), and reset, with a
// recorded refusal, at most once per window, as one more of the window's entries.
func (a *AuthFailures) take(withinIP bool) (record bool, unrecorded int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := a.now(); now.Sub(a.window) >= AuthFailureWindow || now.Before(a.window) {
		a.window, a.written, a.reported = now, 0, false
	}
	if !withinIP || a.written >= AuthFailuresPerInstance {
		a.dropped++
		return false, 0
	}
	a.written++
	if a.dropped > 0 && !a.reported && a.written < AuthFailuresPerInstance {
		unrecorded, a.dropped, a.reported = a.dropped, 0, true
		a.written++
	}
	return true, unrecorded
}

func (a *AuthFailures) append(ctx context.Context, e domain.AuditEntry) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := a.admin.Record(ctx, e); err != nil {
		a.log.ErrorContext(ctx, "audit entry not stored", "action", e.Action, "target", e.Target,
			"client_addr", e.ClientAddr, "err", err)
	}
}

// Limiter decides whether one more request under a key is within a limit. Rate limiting is a
// concern of the HTTP edge, not of the shop, so the port lives here and not in the domain;
// adapters/ratelimit implements it in memory and on Redis (shared by every instance).
type Limiter interface {
	// Allow charges one request to key against limit requests per window. It reports whether
	// the request may go ahead and, when not, how long until one would be allowed. An error
	// means the limiter could not decide (Redis unreachable: it wraps domain.ErrUnavailable).
	Allow(ctx context.Context, key string, limit int, window time.Duration) (allowed bool, retryAfter time.Duration, err error)
}
