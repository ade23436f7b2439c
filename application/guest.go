package application

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"cardshop/domain"
)

// GuestOrder is a storefront buyer's order without an account: qty codes of a product for the
// buyer's e-mail address, in the buyer's language ("zh-CN" or "en").
type GuestOrder struct {
	Product        domain.ProductID
	Qty            int
	Email, Lang    string
	IdempotencyKey string
	Coupon         string // a coupon code, or ""
}

// GuestPlaced is the answer to PlaceGuestOrder: the order and its access secret (the same
// secret for a replay). Replayed is true when the key had already been used with the same
// request and Order is the original order.
type GuestPlaced struct {
	Order    domain.Order
	Secret   string
	Replayed bool
}

// errNoAccessKey refuses guest orders on a shop configured without Config.OrderAccessKey.
var errNoAccessKey = errors.New("guest orders need Config.OrderAccessKey")

// minAccessKey is the shortest OrderAccessKey New accepts: the secrets are as strong as it.
const minAccessKey = 16

// PlaceGuestOrder places a guest order: PlaceOrder's path and rules with the buyer
// domain.GuestBuyer(email), so the per-buyer cap and holding limit apply per e-mail address,
// and the order carries the address, the language and the hash of its access secret. The
// secret is derived from the order number (accessSecret) and returned: a replay (same key,
// same request) answers the same order and the same secret.
//
// Errors: PlaceOrder's, a ValidationError (ErrInvalidInput) for a bad address or language,
// ErrIdempotencyMismatch when the key belongs to an order of another kind.
func (s *Sales) PlaceGuestOrder(ctx context.Context, cmd GuestOrder) (GuestPlaced, error) {
	email, err := domain.ParseEmail(cmd.Email)
	if err != nil {
		return GuestPlaced{}, err
	}
	lang, err := domain.ParseBuyerLang(cmd.Lang)
	if err != nil {
		return GuestPlaced{}, err
	}
	if s.cfg.OrderAccessKey == "" {
		return GuestPlaced{}, errNoAccessKey
	}
	placed, err := s.place(ctx, PlaceOrder{Buyer: domain.GuestBuyer(email), Product: cmd.Product, Qty: cmd.Qty,
		IdempotencyKey: cmd.IdempotencyKey, Coupon: cmd.Coupon}, &guestPart{email: email, lang: lang})
	if err != nil {
		return GuestPlaced{}, err
	}
	if !placed.Order.IsGuest() {
		// An API buyer whose chosen id happens to be this address's GuestBuyer used the key.
		return GuestPlaced{}, domain.ErrIdempotencyMismatch
	}
	return GuestPlaced{Order: placed.Order, Secret: s.accessSecret(placed.Order.No()), Replayed: placed.Replayed}, nil
}

// guestPart is what a guest order adds to PlaceOrder's command.
type guestPart struct {
	email domain.Email
	lang  string
}

// accessSecret is the order's access secret: HMAC-SHA256(Config.OrderAccessKey,
// "order-access\x00" + number), its first 128 bits in unpadded base64url (22 characters). It
// is derived, never stored: the e-mail and a replayed checkout derive it again.
func (s *outbox) accessSecret(no domain.OrderNo) string {
	mac := hmac.New(sha256.New, []byte(s.cfg.OrderAccessKey.Reveal()))
	mac.Write([]byte("order-access\x00"))
	mac.Write([]byte(no))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// hashSecret is what the ledger keeps of an access secret.
func hashSecret(secret string) domain.AccessHash { return sha256.Sum256([]byte(secret)) }

// dummyHash stands in for a missing order's hash, so that a wrong number costs the same
// hashing and comparing as a wrong secret.
var dummyHash = hashSecret("no order has this secret")

// GuestOrder is the buyer's order page: the guest order with its codes once PAID, when secret
// is its access secret. Showing the codes is a reveal, exactly as in BuyerOrder.
//
// A wrong secret, an API order and a missing order all answer ErrOrderNotFound, after the same
// work (one read, one hash, one constant-time comparison), so numbers cannot be probed.
//
// Errors: ErrOrderNotFound, ErrUnavailable.
func (s *Sales) GuestOrder(ctx context.Context, no domain.OrderNo, secret string) (OrderView, error) {
	o, err := s.guestOrder(ctx, no, "", secret, false)
	if err != nil {
		return OrderView{}, err
	}
	return s.view(ctx, o, true)
}

// GuestOrderStatus is GuestOrder without codes and without a reveal: the pay page's polling.
//
// Errors: ErrOrderNotFound, ErrUnavailable.
func (s *Sales) GuestOrderStatus(ctx context.Context, no domain.OrderNo, secret string) (domain.Order, error) {
	return s.guestOrder(ctx, no, "", secret, false)
}

// LookupGuestOrder is the order lookup: the order when the number, the e-mail address (as
// typed: it is normalised like at checkout) and the access secret all match; anything else is
// ErrOrderNotFound, after the same work whether the order exists or not. No codes, no reveal:
// the storefront moves on to the order page (GuestOrder) with the secret.
//
// Errors: ErrOrderNotFound, ErrUnavailable.
func (s *Sales) LookupGuestOrder(ctx context.Context, no domain.OrderNo, email, secret string) (domain.Order, error) {
	return s.guestOrder(ctx, no, email, secret, true)
}

// guestOrder reads the order and checks the secret (and, withEmail, the address) in constant
// time against the order's, or against dummy values when there is no such guest order.
func (s *Sales) guestOrder(ctx context.Context, no domain.OrderNo, email, secret string, withEmail bool) (domain.Order, error) {
	o, err := s.ledger.Orders().Order(ctx, no)
	if err != nil && !errors.Is(err, domain.ErrOrderNotFound) {
		return domain.Order{}, fmt.Errorf("load order: %w", err)
	}
	found := err == nil && o.IsGuest()
	want, wantEmail := dummyHash, dummyHash
	if found {
		want, wantEmail = o.AccessHash(), hashSecret(string(o.Email()))
	}
	got := hashSecret(secret)
	match := subtle.ConstantTimeCompare(got[:], want[:])
	if withEmail {
		typed, perr := domain.ParseEmail(email)
		gotEmail := hashSecret(string(typed))
		match &= subtle.ConstantTimeCompare(gotEmail[:], wantEmail[:])
		if perr != nil {
			match = 0
		}
	}
	if !found || match != 1 {
		return domain.Order{}, domain.ErrOrderNotFound
	}
	return o, nil
}

// SaleClock is the gate's clock (Redis's TIME) as best known on this instance: this instance's
// clock plus the offset measured at the public catalogue's last refresh (zero before the first
// one, or with a gate that cannot tell its time). The storefront's countdown to a sale's start
// runs on it, so it turns into the order form when the gate starts taking orders.
func (s *Sales) SaleClock(_ context.Context) time.Time {
	return s.clock.Now().Add(time.Duration(s.catalogue.gateOffset.Load()))
}

// measureGateClock measures the gate's clock against this instance's, as the middle of the
// round trip, and keeps the offset for SaleClock. A gate that is no domain.GateClock, or a
// failed measure, keeps the last offset.
func (s *stock) measureGateClock(ctx context.Context) {
	gc, ok := s.gate.(domain.GateClock)
	if !ok {
		return
	}
	before := s.clock.Now()
	at, err := gc.GateTime(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "gate clock not measured; the last offset stays", "err", err)
		return
	}
	after := s.clock.Now()
	mid := before.Add(after.Sub(before) / 2)
	s.catalogue.gateOffset.Store(int64(at.Sub(mid)))
}
