package stripe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cardshop/domain"
)

// Stripe's bounds on a Checkout Session's expires_at, from its creation.
const (
	MinSessionLife = 30 * time.Minute
	MaxSessionLife = 24 * time.Hour
)

// expiryMargin is added to MinSessionLife and taken from MaxSessionLife: skew between the
// shop's clock and Stripe's.
const expiryMargin = time.Minute

// maxReply bounds the bytes read from one API reply.
const maxReply = 1 << 20

// IdempotencyKey is the Idempotency-Key of the creation of an order's session.
func IdempotencyKey(no domain.OrderNo) string { return "cardshop-" + string(no) }

// SessionExpiresAt is the expires_at Create sends for an order expiring at orderExpiry,
// created at now: a function of the order alone (see the package doc), capped at Stripe's
// maximum for orders that live longer than a day.
func SessionExpiresAt(orderExpiry, now time.Time) time.Time {
	at := orderExpiry.Add(MinSessionLife + expiryMargin)
	if limit := now.Add(MaxSessionLife - expiryMargin); at.After(limit) {
		at = limit
	}
	return at.Truncate(time.Second)
}

// Gateway is Stripe as a domain.PaymentGateway.
type Gateway struct {
	base   *url.URL
	key    domain.Secret
	whsecs []domain.Secret
	client *http.Client
	clock  domain.Clock
}

var _ domain.PaymentGateway = (*Gateway)(nil)

// Format prints the gateway without its secrets, for every verb.
func (g Gateway) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "stripe.Gateway{%s}", g.base.Redacted())
}

// LogValue logs the gateway without its secrets.
func (g Gateway) LogValue() slog.Value { return slog.StringValue("stripe " + g.base.Redacted()) }

// Provider is "stripe".
func (g *Gateway) Provider() domain.Provider { return Name }

// zeroDecimal and threeDecimal are Stripe's currencies whose API amounts are not in hundredths.
// Stripe takes ISK and UGX in hundredths though ISO 4217 gives them no minor unit, so a
// domain.Currency of either, with exponent 0, is not supported.
var minorDigits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "JPY": 0, "KMF": 0, "KRW": 0, "MGA": 0, "PYG": 0,
	"RWF": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "JOD": 3, "KWD": 3, "OMR": 3, "TND": 3,
}

// stripeExponent is how many digits the minor unit of code has in Stripe's API amounts.
func stripeExponent(code string) int {
	if d, ok := minorDigits[code]; ok {
		return d
	}
	return 2
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// Supports reports whether Stripe amounts of c are in c's minor unit: the shop's integer
// amounts go to Stripe unchanged.
func (g *Gateway) Supports(c domain.Currency) bool {
	return currencyCode.MatchString(c.Code) && stripeExponent(c.Code) == c.Exponent
}

// Session is the part of Stripe's checkout.session object the gateway reads.
type Session struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	URL               string            `json:"url"`
	ClientReferenceID string            `json:"client_reference_id"`
	AmountTotal       *int64            `json:"amount_total"`
	Currency          string            `json:"currency"`
	PaymentStatus     string            `json:"payment_status"`
	Status            string            `json:"status"`
	ExpiresAt         int64             `json:"expires_at"`
	Metadata          map[string]string `json:"metadata"`
	PaymentIntent     expandable        `json:"payment_intent"`
}

// Create opens the order's Checkout Session.
func (g *Gateway) Create(ctx context.Context, r domain.PaymentRequest) (domain.PaymentCreated, error) {
	if r.OrderNo == "" || r.Amount <= 0 {
		return domain.PaymentCreated{}, domain.Invalid("payment", "order number and a positive amount are required")
	}
	if !g.Supports(r.Currency) {
		return domain.PaymentCreated{}, domain.Invalid("currency", "Stripe does not take "+r.Currency.Code+" in its minor unit")
	}
	if u, err := url.Parse(r.ReturnURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return domain.PaymentCreated{}, domain.Invalid("return_url", "Stripe needs an absolute http(s) URL")
	}
	now := g.clock.Now()
	if !r.ExpiresAt.After(now) {
		return domain.PaymentCreated{}, fmt.Errorf("stripe: order %s expired at %s: %w", r.OrderNo, r.ExpiresAt.UTC().Format(time.RFC3339), domain.ErrOrderNotPayable)
	}
	subject := strings.TrimSpace(r.Subject)
	if subject == "" {
		subject = "Order " + string(r.OrderNo)
	}
	form := url.Values{
		"mode":                                          {"payment"},
		"line_items[0][price_data][currency]":           {strings.ToLower(r.Currency.Code)},
		"line_items[0][price_data][unit_amount]":        {strconv.FormatInt(int64(r.Amount), 10)},
		"line_items[0][price_data][product_data][name]": {subject},
		"line_items[0][quantity]":                       {"1"},
		"success_url":                                   {r.ReturnURL},
		"cancel_url":                                    {r.ReturnURL},
		"client_reference_id":                           {string(r.OrderNo)},
		"metadata[order_no]":                            {string(r.OrderNo)},
		"expires_at":                                    {strconv.FormatInt(SessionExpiresAt(r.ExpiresAt, now).Unix(), 10)},
	}
	var s Session
	if err := g.call(ctx, http.MethodPost, "/v1/checkout/sessions", form, IdempotencyKey(r.OrderNo), &s); err != nil {
		return domain.PaymentCreated{}, fmt.Errorf("stripe: create the session of order %s: %w", r.OrderNo, err)
	}
	if err := s.check(r.OrderNo); err != nil {
		return domain.PaymentCreated{}, err
	}
	if s.URL == "" || s.AmountTotal == nil || *s.AmountTotal != int64(r.Amount) || s.Currency != strings.ToLower(r.Currency.Code) {
		return domain.PaymentCreated{}, fmt.Errorf("stripe: the session of order %s came back without a URL or with another amount or currency", r.OrderNo)
	}
	return domain.PaymentCreated{ProviderRef: s.ID, PayURL: s.URL}, nil
}

// check refuses a session reply that is not a checkout session of order no.
func (s Session) check(no domain.OrderNo) error {
	if s.Object != "checkout.session" || !sessionID.MatchString(s.ID) {
		return errors.New("stripe: the reply is not a checkout session")
	}
	if s.ClientReferenceID != string(no) {
		return fmt.Errorf("stripe: session %s belongs to order %q, not %s", s.ID, s.ClientReferenceID, no)
	}
	return nil
}

var sessionID = regexp.MustCompile(`^cs_[A-Za-z0-9_]{1,250}$`)

// Query reads the payment's session.
func (g *Gateway) Query(ctx context.Context, p domain.Payment) (domain.PaymentState, error) {
	s, err := g.session(ctx, p)
	if err != nil {
		return domain.PaymentState{}, err
	}
	outcome, err := s.outcome()
	if err != nil {
		return domain.PaymentState{}, err
	}
	st := domain.PaymentState{Outcome: outcome, ProviderRef: s.ID}
	if st.Amount, st.Currency, err = s.money(); err != nil {
		return domain.PaymentState{}, err
	}
	return st, nil
}

// session reads the session of p.
func (g *Gateway) session(ctx context.Context, p domain.Payment) (Session, error) {
	if !sessionID.MatchString(p.ProviderRef) {
		return Session{}, fmt.Errorf("stripe: %q is not a checkout session id", p.ProviderRef)
	}
	var s Session
	if err := g.call(ctx, http.MethodGet, "/v1/checkout/sessions/"+p.ProviderRef, nil, "", &s); err != nil {
		return Session{}, fmt.Errorf("stripe: read session %s: %w", p.ProviderRef, err)
	}
	if err := s.check(p.OrderNo); err != nil {
		return Session{}, err
	}
	return s, nil
}

// outcome maps a session's status and payment status.
func (s Session) outcome() (domain.PaymentOutcome, error) {
	switch s.Status {
	case "open":
		return domain.OutcomePending, nil
	case "complete":
		if s.PaymentStatus == "paid" {
			return domain.OutcomePaid, nil
		}
		return domain.OutcomePending, nil
	case "expired":
		return domain.OutcomeExpired, nil
	}
	return 0, fmt.Errorf("stripe: session %s has the unknown status %q", s.ID, s.Status)
}

// money reads amount_total and currency: zero values when Stripe sent none.
func (s Session) money() (domain.Money, domain.Currency, error) {
	return moneyOf("amount_total", s.AmountTotal, s.Currency)
}

// moneyOf reads an amount in minor units and its lower-case currency: zero values when Stripe
// sent neither.
func moneyOf(field string, amount *int64, currency string) (domain.Money, domain.Currency, error) {
	if amount == nil && currency == "" {
		return 0, domain.Currency{}, nil
	}
	if amount == nil || *amount < 0 || currency != strings.ToLower(currency) {
		return 0, domain.Currency{}, domain.Invalid(field, "missing, negative or without a lower-case currency")
	}
	c, err := domain.ParseCurrency(currency)
	if err != nil || stripeExponent(c.Code) != c.Exponent {
		return 0, domain.Currency{}, domain.Invalid("currency", "not a currency the shop sells in")
	}
	return domain.Money(*amount), c, nil
}

// Close expires the payment's session. A refusal is judged on the session read back: complete
// is domain.ErrAlreadyPaid, expired is done.
func (g *Gateway) Close(ctx context.Context, p domain.Payment) error {
	if !sessionID.MatchString(p.ProviderRef) {
		return fmt.Errorf("stripe: %q is not a checkout session id", p.ProviderRef)
	}
	var s Session
	err := g.call(ctx, http.MethodPost, "/v1/checkout/sessions/"+p.ProviderRef+"/expire", url.Values{}, "", &s)
	var refused *apiError
	if err == nil {
		if err := s.check(p.OrderNo); err != nil {
			return err
		}
		if s.Status != "expired" {
			return fmt.Errorf("stripe: session %s is %q after expiring it", s.ID, s.Status)
		}
		return nil
	}
	if !errors.As(err, &refused) || refused.status == http.StatusNotFound {
		return fmt.Errorf("stripe: expire session %s: %w", p.ProviderRef, err)
	}
	s, rerr := g.session(ctx, p)
	if rerr != nil {
		return fmt.Errorf("stripe: expire session %s: %w (and reading it back: %w)", p.ProviderRef, err, rerr)
	}
	switch s.Status {
	case "expired":
		return nil
	case "complete":
		return fmt.Errorf("stripe: session %s is complete (payment %s): %w", s.ID, s.PaymentStatus, domain.ErrAlreadyPaid)
	}
	return fmt.Errorf("stripe: expire session %s: %w", p.ProviderRef, err)
}

// apiError is a 4xx answer Stripe gave: the request was understood and refused.
type apiError struct {
	status  int
	typ     string
	code    string
	message string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("Stripe answered %d %s", e.status, e.typ)
	if e.code != "" {
		s += " (" + e.code + ")"
	}
	return s + ": " + e.message
}

// call sends one request and decodes the JSON reply into out. A nil form sends no body.
func (g *Gateway) call(ctx context.Context, method, path string, form url.Values, idemKey string, out any) error {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, g.base.String()+path, body)
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+g.key.Reveal())
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "cardshop")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, g.scrub(err))
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return fmt.Errorf("%w: reading the reply: %w", domain.ErrUnavailable, g.scrub(err))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("the %d reply is not the expected JSON object", resp.StatusCode)
		}
		return nil
	}
	e := g.apiError(resp.StatusCode, raw)
	switch {
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, e)
	}
	return e
}

// apiError reads Stripe's error object: {"error":{"type","code","message",…}}.
func (g *Gateway) apiError(status int, raw []byte) *apiError {
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e := &apiError{status: status, typ: "error", message: http.StatusText(status)}
	if json.Unmarshal(raw, &env) == nil && env.Error.Message != "" {
		e.typ, e.code, e.message = env.Error.Type, env.Error.Code, env.Error.Message
	}
	if len(e.message) > 500 {
		e.message = e.message[:500] + "…"
	}
	e.message = strings.ReplaceAll(e.message, g.key.Reveal(), domain.Redacted)
	return e
}

// scrub removes the key from a transport error's text (a URL or a header echoed back).
func (g *Gateway) scrub(err error) error {
	if !bytes.Contains([]byte(err.Error()), []byte(g.key.Reveal())) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), g.key.Reveal(), domain.Redacted))
}

// Probe reads a checkout session that does not exist: Stripe answers 404 resource_missing to
// a key it accepts and 401 to one it does not (the console's test of the channel). ref names
// the made-up session.
func (g *Gateway) Probe(ctx context.Context, ref string) (string, error) {
	id := "cs_test_cardshop_probe_" + ref
	if !sessionID.MatchString(id) {
		return "", fmt.Errorf("stripe: %q is not a checkout session id", id)
	}
	var s Session
	err := g.call(ctx, http.MethodGet, "/v1/checkout/sessions/"+id, nil, "", &s)
	var refused *apiError
	switch {
	case err == nil:
		return "the made-up session " + id + " exists", nil
	case errors.As(err, &refused) && refused.status == http.StatusNotFound:
		return refused.Error(), nil
	}
	return "", fmt.Errorf("stripe: probe: %w", err)
}
