package storefront

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// lookupData is the lookup page's: whether the last attempt failed.
type lookupData struct {
	Failed bool
}

// lookupPage is GET /lookup: the form (order number, e-mail, access secret).
func (s *shop) lookupPage(c *fiber.Ctx) error {
	return s.lookupForm(c, fiber.StatusOK, false)
}

func (s *shop) lookupForm(c *fiber.Ctx, status int, failed bool) error {
	tok, err := s.csrfToken(c)
	if err != nil {
		return s.internal(c, "csrf token", err)
	}
	return s.render(c, status, "lookup", "/lookup", view{Title: "storefront.title_lookup", CSRF: tok,
		Data: lookupData{Failed: failed}})
}

// lookup is POST /lookup: the three together open the order page (the secret goes into the
// order's cookie). Any wrong combination — no such order, another e-mail, another secret —
// gets the same page and status, and the application does the same work for each, so nothing
// tells them apart; what was typed is not echoed. Limited per client IP and per order number.
func (s *shop) lookup(c *fiber.Ctx) error {
	rawNo := strings.TrimSpace(formValue(c, "order_no"))
	if ok, retry := s.allowLookup(c, rawNo); !ok {
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(max(int64((retry+time.Second-1)/time.Second), 1), 10))
		return s.message(c, fiber.StatusTooManyRequests, "storefront.err_lookup_limited", "/lookup")
	}
	no, err := domain.ParseOrderNo(rawNo)
	if err != nil {
		no = ""
	}
	o, err := s.sales.LookupGuestOrder(c.UserContext(), no, strings.TrimSpace(formValue(c, "email")),
		strings.TrimSpace(formValue(c, "secret")))
	if err != nil {
		if errorsIsNotFound(err) {
			return s.lookupForm(c, fiber.StatusNotFound, true)
		}
		return s.unavailable(c, err)
	}
	s.grant(c, o.No(), strings.TrimSpace(formValue(c, "secret")))
	return c.Redirect(orderPath(o.No()), fiber.StatusSeeOther)
}

// allowLookup charges a lookup to the client IP and to the order number typed. A limiter
// that cannot decide lets the lookup through (the secret is not guessable anyway).
func (s *shop) allowLookup(c *fiber.Ctx, no string) (bool, time.Duration) {
	if s.cfg.Limiter == nil {
		return true, 0
	}
	if len(no) > 64 {
		no = no[:64]
	}
	for _, key := range []string{"shop-lookup-ip:" + webkit.ClientIP(c), "shop-lookup-no:" + no} {
		ok, retry, err := s.cfg.Limiter.Allow(c.UserContext(), key, s.cfg.LookupsPerWindow, s.cfg.LookupWindow)
		if err != nil {
			s.log.WarnContext(c.UserContext(), "storefront: lookup limiter failed; lookup let through", "err", err)
			continue
		}
		if !ok {
			return false, retry
		}
	}
	return true, 0
}

// errorsIsNotFound reports a lookup that found nothing: no order, or a combination that does
// not match (malformed input included).
func errorsIsNotFound(err error) bool {
	return errors.Is(err, domain.ErrOrderNotFound) || errors.Is(err, domain.ErrInvalidInput)
}
