package console

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

func (k *console) loginPage(c *fiber.Ctx) error {
	return k.render(c, fiber.StatusOK, "login", view{Title: "console.login.title"})
}

// login checks the token after the per-IP login limit (a refused attempt checks no token),
// then starts a session: the shared admin token (compared in constant time) or an operator's.
// A failed or refused attempt is logged and audited (console.login_failed,
// console.login_rate_limited) through webkit.AuthFailures: the client's address and the
// operator the token claimed, never its secret; a refusal once per address and window.
//
// A new session is issued after the identity's last logout (SessionsEnded), even on an
// instance whose clock lags the one that recorded it: a logout refuses every session issued
// at or before it, and must not refuse the next login.
func (k *console) login(c *fiber.Ctx) error {
	tok := strings.TrimSpace(formValue(c, "token"))
	if ok, retry := k.allowLogin(c); !ok {
		k.cfg.AuthFailures.Refused(c, webkit.ActionLoginRateLimited, tok, "429 rate_limited", 1)
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(max(int64((retry+time.Second-1)/time.Second), 1), 10))
		return k.render(c, fiber.StatusTooManyRequests, "login", view{Title: "console.login.title",
			Error: "console.login.too_many"})
	}
	id, err := k.authenticate(c.UserContext(), tok)
	if err != nil {
		if errors.Is(err, domain.ErrUnauthorized) {
			k.cfg.AuthFailures.Refused(c, webkit.ActionLoginFailed, tok, "401 unauthorized", k.cfg.LoginsPerWindow)
			return k.render(c, fiber.StatusUnauthorized, "login", view{Title: "console.login.title", Error: "console.login.bad_token"})
		}
		return k.fail(c, err)
	}
	ended, err := k.operators.ConsoleSessionsEnded(c.UserContext(), id.Name)
	if err != nil {
		return k.fail(c, err)
	}
	csrf, err := newCSRF()
	if err != nil {
		return k.fail(c, err)
	}
	now := k.clock.Now()
	issued := now.UnixMicro()
	if !ended.IsZero() && issued <= ended.UnixMicro() {
		issued = ended.UnixMicro() + 1
	}
	s := session{Name: id.Name, IssuedAt: issued, Expires: now.Add(SessionTTL).UnixMicro(), CSRF: csrf}
	if id == application.LegacyAdminIdentity {
		s.Admin = k.seal.adminPrint(k.cfg.AdminToken)
	}
	c.Cookie(&fiber.Cookie{Name: CookieName, Value: k.seal.seal(s), Path: "/console", Expires: now.Add(SessionTTL),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: secure(c)})
	k.log.InfoContext(c.UserContext(), "console: login", "operator", id.Name, "role", id.Role, "client_addr", webkit.ClientIP(c))
	return c.Redirect("/console", fiber.StatusSeeOther)
}

// authenticate resolves a login token to its identity.
func (k *console) authenticate(ctx context.Context, tok string) (application.Identity, error) {
	if tok == "" {
		return application.Identity{}, domain.ErrUnauthorized
	}
	if k.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(k.cfg.AdminToken)) == 1 {
		return application.LegacyAdminIdentity, nil
	}
	return k.operators.Authenticate(ctx, tok)
}

// allowLogin charges a login attempt to the client IP. A limiter that cannot decide (Redis
// down) lets the attempt through, as the API's limits do: tokens are not guessable anyway.
func (k *console) allowLogin(c *fiber.Ctx) (bool, time.Duration) {
	if k.cfg.Limiter == nil {
		return true, 0
	}
	ok, retry, err := k.cfg.Limiter.Allow(c.UserContext(), "console-login:"+webkit.ClientIP(c), k.cfg.LoginsPerWindow, k.cfg.LoginWindow)
	if err != nil {
		k.log.WarnContext(c.UserContext(), "console: login limiter failed; attempt let through", "err", err)
		return true, 0
	}
	return ok, retry
}

// secure reports whether the browser reached the service over TLS (directly, or through a
// proxy that says so in X-Forwarded-Proto: Fiber's Protocol), so the cookie is Secure then.
// The service has no trusted-proxy setting, so any client may send the header; a forged one
// only makes its own cookie Secure, which costs it nothing but its own session.
func secure(c *fiber.Ctx) bool { return c.Protocol() == "https" }

// logout ends the session on the server, not only in this browser: it records the logout
// time of the session's identity (ConsoleLogOut), and every session of that identity issued at
// or before it is refused from then on, on every instance — a copied cookie included, and the
// identity's sessions in its other browsers too (the session is a signed cookie with no
// store, so "this session" cannot be told from "this identity's sessions"; one logout time per
// identity is the whole state). The cookie is cleared whatever happens; a logout that cannot
// be recorded is an error page saying so, as the session may still work elsewhere.
func (k *console) logout(c *fiber.Ctx) error {
	k.clearCookie(c)
	id, s := identityOf(c), sessionOf(c)
	if err := k.operators.ConsoleLogOut(c.UserContext(), id.Name, time.UnixMicro(s.IssuedAt)); err != nil {
		k.log.ErrorContext(c.UserContext(), "console: logout not recorded", "operator", id.Name, "err", err)
		return k.errorPage(c, fiber.StatusServiceUnavailable,
			"console.logout.not_recorded")
	}
	k.log.InfoContext(c.UserContext(), "console: logout", "operator", id.Name, "client_addr", webkit.ClientIP(c))
	return c.Redirect("/console/login", fiber.StatusSeeOther)
}

func (k *console) clearCookie(c *fiber.Ctx) {
	c.Cookie(&fiber.Cookie{Name: CookieName, Value: "", Path: "/console", Expires: time.Unix(0, 0), MaxAge: -1,
		HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: secure(c)})
}

// fail answers an error of a use case: its status and a safe message, never the internal text.
func (k *console) fail(c *fiber.Ctx, err error) error {
	status, msg := k.explain(c, err)
	if status >= 500 {
		k.log.ErrorContext(c.UserContext(), "console: request failed", "path", c.Path(), "err", err)
	}
	return k.errorPage(c, status, msg)
}

// describe is an error's status and the API's (English) message for it, safe to show: never
// the internal text. Pages say errors in the operator's language with k.explain.
func describe(err error) (int, string) {
	status, _, msg := webkit.Describe(err)
	return status, msg
}

// record appends a console write to the audit log, exactly as the API's audited middleware
// does: who, with what role, the action, its target, its parameters (never the CSRF token, a
// secret or a code), the result in the API's words, and the client's address. The write has
// happened by then; an entry that cannot be stored is logged as an error, never lost silently.
func (k *console) record(c *fiber.Ctx, action string, params map[string]string, err error) {
	k.appendEntry(c.UserContext(), k.entry(c, action, auditParams(params), err))
}

// entry is the audit entry of a console write: who, the route's target, the client's address.
func (k *console) entry(c *fiber.Ctx, action, params string, err error) domain.AuditEntry {
	id := identityOf(c)
	return domain.AuditEntry{Operator: id.Name, Role: id.Role, Action: action, Target: webkit.AuditTarget(c),
		Params: params, Result: webkit.AuditResult(fiber.StatusOK, err), ClientAddr: webkit.ClientIP(c)}
}

// appendEntry stores an audit entry; one that cannot be stored is logged as an error.
func (k *console) appendEntry(ctx context.Context, e domain.AuditEntry) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, aerr := k.operators.Record(ctx, e); aerr != nil {
		k.log.ErrorContext(ctx, "audit entry not stored", "operator", e.Operator, "action", e.Action,
			"target", e.Target, "result", e.Result, "err", aerr)
	}
}

// maxAuditParams bounds the parameters recorded with an entry, as the API does.
const maxAuditParams = 4096

func auditParams(p map[string]string) string {
	out := map[string]string{}
	for k, v := range p {
		if k != "csrf" && !webkit.SecretField(k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return ""
	}
	b, _ := json.Marshal(out)
	if len(b) > maxAuditParams {
		return string(b[:maxAuditParams-1]) + "…"
	}
	return string(b)
}
