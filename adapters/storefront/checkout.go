package storefront

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// The human-check widgets' form fields.
const (
	turnstileField = "cf-turnstile-response"
	hcaptchaField  = "h-captcha-response"
)

// confirmData is the confirmation page's: the order, its access secret (shown this once), the
// product's name and the pay form.
type confirmData struct {
	Order    orderView
	Secret   string
	Replayed bool
}

// checkout is POST /checkout: the bot defence (when configured) first, then the guest order
// (price, limits and sale window decided by the application and the gate, never by the form).
// A refusal is a page in the buyer's language with a way back; success is the confirmation
// page with the access secret and the pay form. The same form sent twice (its idempotency
// key) shows the same order and secret.
func (s *shop) checkout(c *fiber.Ctx) error {
	pid, err := strconv.ParseInt(formValue(c, "product"), 10, 64)
	if err != nil || pid <= 0 {
		return s.message(c, fiber.StatusNotFound, "storefront.no_product", "/")
	}
	back := "/p/" + strconv.FormatInt(pid, 10)
	qty, err := strconv.Atoi(strings.TrimSpace(formValue(c, "qty")))
	if err != nil {
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_qty_number", back)
	}
	email := strings.TrimSpace(formValue(c, "email"))
	if ok, retry := s.allowCheckout(c); !ok {
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(max(int64((retry+time.Second-1)/time.Second), 1), 10))
		return s.message(c, fiber.StatusTooManyRequests, "storefront.err_rate_limited", back)
	}
	if s.cfg.Screen != nil {
		human := formValue(c, turnstileField)
		if s.cfg.Widget.Provider == WidgetHCaptcha {
			human = formValue(c, hcaptchaField)
		}
		if err := s.cfg.Screen.Check(c.UserContext(), BuyerCheck{IP: webkit.ClientIP(c), Email: email, HumanToken: human}); err != nil {
			if errors.Is(err, domain.ErrUnavailable) {
				return s.unavailable(c, err)
			}
			s.log.InfoContext(c.UserContext(), "storefront: order refused by the bot defence", "client_addr", webkit.ClientIP(c), "err", err)
			return s.message(c, fiber.StatusForbidden, "storefront.err_screen", back)
		}
	}
	placed, err := s.sales.PlaceGuestOrder(c.UserContext(), application.GuestOrder{Product: domain.ProductID(pid), Qty: qty,
		Email: email, Lang: string(s.lang(c)), IdempotencyKey: formValue(c, "key"), Coupon: strings.TrimSpace(formValue(c, "coupon"))})
	if err != nil {
		return s.refusal(c, err, back)
	}
	o := placed.Order
	s.grant(c, o.No(), placed.Secret)
	tok, err := s.csrfToken(c)
	if err != nil {
		return s.internal(c, "csrf token", err)
	}
	ov := s.orderView(c, o)
	ov.Preferred, ov.CSRF = domain.Provider(formValue(c, "provider")), tok
	withPayForm(c)
	return s.render(c, fiber.StatusOK, "confirm", ov.Path, view{Title: "storefront.title_confirm", CSRF: tok,
		Data: confirmData{Order: ov, Secret: placed.Secret, Replayed: placed.Replayed}})
}

// refusal answers an order the application refused: a page saying why, in the buyer's
// language, with a way back to the product. Only an unexpected failure is logged as an error.
func (s *shop) refusal(c *fiber.Ctx, err error, back string) error {
	var nse *domain.SaleNotStartedError
	var ve *domain.ValidationError
	switch {
	case errors.As(err, &nse):
		return s.message(c, fiber.StatusConflict, "storefront.err_not_started", back, "Seconds", left(nse.StartsIn+time.Second-1))
	case errors.Is(err, domain.ErrSaleNotStarted):
		return s.message(c, fiber.StatusConflict, "storefront.err_not_started_now", back)
	case errors.Is(err, domain.ErrSoldOut):
		return s.message(c, fiber.StatusConflict, "storefront.err_sold_out", back)
	case errors.Is(err, domain.ErrSaleEnded):
		return s.message(c, fiber.StatusConflict, "storefront.err_ended", back)
	case errors.Is(err, domain.ErrProductFrozen):
		return s.message(c, fiber.StatusConflict, "storefront.err_paused", back)
	case errors.Is(err, domain.ErrProductNotFound):
		return s.message(c, fiber.StatusNotFound, "storefront.no_product", "/")
	case errors.Is(err, domain.ErrQtyOutOfRange):
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_qty", back)
	case errors.Is(err, domain.ErrBuyerHoldingLimit):
		return s.message(c, fiber.StatusConflict, "storefront.err_holding_limit", back)
	case errors.Is(err, domain.ErrBuyerLimit):
		c.Set(fiber.HeaderRetryAfter, "60")
		return s.message(c, fiber.StatusTooManyRequests, "storefront.err_rate_limited", back)
	case errors.Is(err, domain.ErrIdempotencyMismatch), errors.Is(err, domain.ErrInvalidIdempotencyKey):
		return s.message(c, fiber.StatusConflict, "storefront.err_form_reused", back)
	case errors.Is(err, domain.ErrRequestInProgress):
		return s.message(c, fiber.StatusConflict, "storefront.err_in_progress", back)
	case errors.Is(err, domain.ErrCouponNotFound):
		return s.message(c, fiber.StatusNotFound, "storefront.err_coupon_unknown", back)
	case errors.Is(err, domain.ErrCouponNotApplicable):
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_coupon_not_applicable", back)
	case errors.Is(err, domain.ErrCouponUsedUp):
		return s.message(c, fiber.StatusConflict, "storefront.err_coupon_used_up", back)
	case errors.Is(err, domain.ErrCouponBuyerLimit):
		return s.message(c, fiber.StatusConflict, "storefront.err_coupon_buyer_limit", back)
	case errors.As(err, &ve) && ve.Field == "coupon":
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_coupon_unknown", back)
	case errors.As(err, &ve) && ve.Field == "email":
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_email", back)
	case errors.Is(err, domain.ErrInvalidInput):
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.bad_form", back)
	case errors.Is(err, domain.ErrGateNotReady), errors.Is(err, domain.ErrUnavailable):
		return s.unavailable(c, err)
	}
	return s.internal(c, "order", err)
}

// allowCheckout charges an order to the client IP (Config.CheckoutsPerWindow). A limiter
// that cannot decide lets the order through, as the API's limits do: the gate's own rules
// (stock, per-buyer limits) still hold.
func (s *shop) allowCheckout(c *fiber.Ctx) (bool, time.Duration) {
	if s.cfg.CheckoutsPerWindow <= 0 {
		return true, 0
	}
	ok, retry, err := s.cfg.Limiter.Allow(c.UserContext(), "shop-checkout-ip:"+webkit.ClientIP(c), s.cfg.CheckoutsPerWindow, s.cfg.CheckoutWindow)
	if err != nil {
		s.log.WarnContext(c.UserContext(), "storefront: checkout limiter failed; order let through", "err", err)
		return true, 0
	}
	return ok, retry
}

// reviewData is the review page's: the order as it will be placed, priced by the shop, and the
// form that places it.
type reviewData struct {
	Item     itemView
	Qty      int
	Unit     string // the unit price for this quantity (its tier)
	Amount   string // to pay: after the coupon's discount
	Coupon   domain.CouponCode
	Discount string
	Email    string
	Provider domain.Provider
	Key      string // the order's idempotency key: fresh on every review page
	Widget   Widget
	Path     string // the product page, to change the order
}

// review is POST /checkout/review, what the product page's form asks for: the order it
// describes, priced by the shop from the snapshot (quantity tiers), with the form that places
// it (POST /checkout). That form carries the browser's CSRF token, a fresh idempotency key (a
// double submit places one order) and the human-check widget. Nothing is reserved here, so the
// product page's form needs no token and the product page stays the same for everyone. A form
// the shop would refuse anyway (quantity, e-mail address, a product not on sale) is refused
// here with the same pages as the checkout.
func (s *shop) review(c *fiber.Ctx) error {
	pid, err := strconv.ParseInt(formValue(c, "product"), 10, 64)
	if err != nil || pid <= 0 {
		return s.message(c, fiber.StatusNotFound, "storefront.no_product", "/")
	}
	back := "/p/" + strconv.FormatInt(pid, 10)
	snap, err := s.sales.Catalogue(c.UserContext())
	if err != nil {
		return s.unavailable(c, err)
	}
	it, ok := snap.Item(domain.ProductID(pid))
	if !ok {
		return s.message(c, fiber.StatusNotFound, "storefront.no_product", "/")
	}
	switch it.Status {
	case application.CatalogueSoldOut:
		return s.message(c, fiber.StatusConflict, "storefront.err_sold_out", back)
	case application.CatalogueEnded:
		return s.message(c, fiber.StatusConflict, "storefront.err_ended", back)
	case application.CataloguePaused:
		return s.message(c, fiber.StatusConflict, "storefront.err_paused", back)
	case application.CatalogueOnSale, application.CatalogueUpcoming:
	default:
	}
	qty, err := strconv.Atoi(strings.TrimSpace(formValue(c, "qty")))
	if err != nil {
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_qty_number", back)
	}
	if qty < it.MinPerOrder && it.MinPerOrder > 1 {
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_qty_min", back, "Min", it.MinPerOrder)
	}
	if qty < 1 || qty > maxQty(it) {
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_qty", back)
	}
	email, err := domain.ParseEmail(formValue(c, "email"))
	if err != nil {
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_email", back)
	}
	provider := domain.Provider(formValue(c, "provider"))
	if providers := s.payments.Providers(); len(providers) > 0 && !slices.Contains(providers, provider) {
		provider = providers[0]
	}
	unit := domain.TierPrice(it.Price, it.Tiers, qty)
	amount, err := unit.Times(qty)
	if err != nil {
		return s.message(c, fiber.StatusUnprocessableEntity, "storefront.err_qty", back)
	}
	var coupon domain.CouponCode
	var off domain.Money
	if code := strings.TrimSpace(formValue(c, "coupon")); code != "" {
		if coupon, off, err = s.sales.QuoteCoupon(c.UserContext(), domain.ProductID(pid), amount, code); err != nil {
			return s.refusal(c, err, back)
		}
	}
	key, err := randomToken(18)
	if err != nil {
		return s.internal(c, "idempotency key", err)
	}
	tok, err := s.csrfToken(c)
	if err != nil {
		return s.internal(c, "csrf token", err)
	}
	v := view{Title: "storefront.title_review", CSRF: tok, Data: reviewData{Item: viewOf(snap.Currency, it), Qty: qty,
		Unit: money(snap.Currency, unit), Amount: money(snap.Currency, amount-off), Email: string(email), Provider: provider,
		Coupon: coupon, Discount: money(snap.Currency, off),
		Key: key, Widget: s.cfg.Widget, Path: back}}
	withWidget(&v, s.cfg.Widget)
	return s.render(c, fiber.StatusOK, "review", back, v)
}
