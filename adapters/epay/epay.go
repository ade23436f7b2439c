package epay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"cardshop/domain"
)

// DefaultTimeout bounds one call to the gateway when the configured client has no timeout.
const DefaultTimeout = 10 * time.Second

// Mode is how a payment is created at the gateway.
type Mode int

// The modes.
const (
	ModeRedirect Mode = iota // PayURL is {gateway}/submit.php?…; the gateway learns of the order when the buyer opens it
	ModeAPI                  // POST {gateway}/mapi.php; the gateway answers trade_no and payurl, qrcode or urlscheme
)

// String names the mode as configuration spells it.
func (m Mode) String() string {
	if m == ModeAPI {
		return "api"
	}
	return "redirect"
}

// ParseMode reads a mode from configuration: "redirect" or "api".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "redirect":
		return ModeRedirect, nil
	case "api":
		return ModeAPI, nil
	}
	return 0, fmt.Errorf("epay mode %q: want redirect or api", s)
}

// ParseSignVariant reads a signing variant from configuration: "append" (KEY appended
// directly) or "ampkey" ("&key=KEY" appended).
func ParseSignVariant(s string) (SignVariant, error) {
	switch s {
	case "append":
		return SignAppend, nil
	case "ampkey":
		return SignAmpKey, nil
	}
	return 0, fmt.Errorf("epay sign variant %q: want append or ampkey", s)
}

// Config configures a Gateway.
type Config struct {
	// Name is the provider's name in the notify URL; "epay" when empty.
	Name domain.Provider
	// GatewayURL is the gateway's base URL: submit.php, mapi.php and api.php are under it.
	GatewayURL string
	// PID is the merchant id.
	PID string
	// Key is the merchant KEY.
	Key domain.Secret
	// Variant is how the KEY joins the signed string (SignAppend unless the gateway says otherwise).
	Variant SignVariant
	// Type is the payment method: alipay (when empty), wxpay, qqpay, …
	Type string
	// Mode is how payments are created.
	Mode Mode
	// Refunds turns on refunds through api.php?act=refund. The gateway's operator must have
	// enabled the merchant's refund API. Off, Refund answers domain.ErrUnsupported: the money
	// goes back by hand.
	Refunds bool
	// HTTPClient calls the gateway; nil for one with DefaultTimeout. It is copied; the copy
	// gets DefaultTimeout when it has none, and follows no redirects (the query URL carries
	// the KEY, and an API that redirects is not answering).
	HTTPClient *http.Client
}

// Gateway is the epay provider. It is safe for concurrent use.
type Gateway struct {
	name    domain.Provider
	base    string // without the trailing slash
	pid     string
	key     domain.Secret
	variant SignVariant
	typ     string
	mode    Mode
	refunds bool
	client  *http.Client
}

var _ domain.PaymentGateway = (*Gateway)(nil)

var (
	pidPattern  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
	typePattern = regexp.MustCompile(`^[a-z0-9]{1,16}$`)
)

// cny is the only currency epay charges in: amounts are yuan with 2 decimals.
var cny = domain.Currency{Code: "CNY", Exponent: 2}

// CheckGatewayURL refuses a gateway URL New refuses.
func CheckGatewayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return errors.New("epay gateway URL must be an http(s) URL without credentials, query or fragment")
	}
	return nil
}

// CheckPID refuses a merchant id New refuses.
func CheckPID(s string) error {
	if !pidPattern.MatchString(s) {
		return errors.New("epay pid must be 1 to 32 characters of A-Z a-z 0-9 _ -")
	}
	return nil
}

// CheckKey refuses a merchant key New refuses (the error never quotes it).
func CheckKey(k domain.Secret) error {
	if len(k) < MinKeyLength {
		return fmt.Errorf("epay merchant key must be at least %d characters", MinKeyLength)
	}
	if strings.TrimSpace(k.Reveal()) != k.Reveal() || strings.ContainsAny(k.Reveal(), "\r\n\t") {
		return errors.New("epay merchant key has white space: a copy-paste error")
	}
	return nil
}

// CheckType refuses a payment type New refuses.
func CheckType(s string) error {
	if !typePattern.MatchString(s) {
		return fmt.Errorf("epay payment type %q: want lower-case letters and digits (alipay, wxpay, qqpay, …)", s)
	}
	return nil
}

// New checks cfg and returns a Gateway. An empty, short or padded KEY is refused: a shop must
// not start with notifications anyone can forge.
func New(cfg Config) (*Gateway, error) {
	name := cfg.Name
	if name == "" {
		name = "epay"
	}
	if _, err := domain.ParseProvider(string(name)); err != nil {
		return nil, fmt.Errorf("epay provider name %q: %w", name, err)
	}
	if err := CheckGatewayURL(cfg.GatewayURL); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.GatewayURL) // checked above
	if err := CheckPID(cfg.PID); err != nil {
		return nil, err
	}
	if err := CheckKey(cfg.Key); err != nil {
		return nil, err
	}
	if cfg.Variant != SignAppend && cfg.Variant != SignAmpKey {
		return nil, errors.New("epay sign variant unknown")
	}
	typ := cfg.Type
	if typ == "" {
		typ = "alipay"
	}
	if err := CheckType(typ); err != nil {
		return nil, err
	}
	if cfg.Mode != ModeRedirect && cfg.Mode != ModeAPI {
		return nil, errors.New("epay mode unknown")
	}
	client := &http.Client{}
	if cfg.HTTPClient != nil {
		*client = *cfg.HTTPClient
	}
	if client.Timeout <= 0 {
		client.Timeout = DefaultTimeout
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Gateway{
		name: name, base: strings.TrimSuffix(u.String(), "/"), pid: cfg.PID, key: cfg.Key,
		variant: cfg.Variant, typ: typ, mode: cfg.Mode, refunds: cfg.Refunds, client: client,
	}, nil
}

// Provider is the provider's name.
func (g *Gateway) Provider() domain.Provider { return g.name }

// Supports reports whether c is CNY, the only currency epay charges in.
func (g *Gateway) Supports(c domain.Currency) bool { return c.Code == cny.Code }

// Reply is the plain text the gateway looks for: "success" stops its resends, anything else
// ("fail") makes it resend. Both are 200: gateways read the body, not the status.
func (g *Gateway) Reply(accepted bool) (status int, contentType string, body []byte) {
	text := "fail"
	if accepted {
		text = "success"
	}
	return http.StatusOK, "text/plain; charset=utf-8", []byte(text)
}

// Close is not offered by epay v1: a payment stays payable at the gateway.
func (g *Gateway) Close(context.Context, domain.Payment) error {
	return fmt.Errorf("epay close: %w", domain.ErrUnsupported)
}

// Create creates the payment. In redirect mode nothing is sent: PayURL is the signed
// submit.php URL and ProviderRef stays empty until a notification or a query gives trade_no;
// the same request gives the same URL, so a retry is harmless. In API mode the form is POSTed
// to mapi.php.
//
// No value holding '&', '=' or a control character is signed: the subject goes through
// SafeName, a client IP that is not an address is left out, and any other such value (a
// return URL with a query) is a ValidationError.
func (g *Gateway) Create(ctx context.Context, r domain.PaymentRequest) (domain.PaymentCreated, error) {
	p, err := g.createParams(r)
	if err != nil {
		return domain.PaymentCreated{}, err
	}
	if g.mode == ModeRedirect {
		p["sign"] = Sign(p, g.key, g.variant)
		p["sign_type"] = "MD5"
		return domain.PaymentCreated{PayURL: g.base + "/submit.php?" + encode(p)}, nil
	}
	if ip, err := netip.ParseAddr(r.ClientIP); err == nil {
		p["clientip"] = ip.String() // anything else is left out: it is optional, and signed
	}
	p["sign"] = Sign(p, g.key, g.variant)
	p["sign_type"] = "MD5"
	return g.apiCreate(ctx, p)
}

// createParams checks r and builds the parameters to sign.
func (g *Gateway) createParams(r domain.PaymentRequest) (Params, error) {
	if _, err := domain.ParseOrderNo(string(r.OrderNo)); err != nil {
		return nil, domain.Invalid("order_no", "not an order number")
	}
	if r.Currency.Code != cny.Code {
		return nil, domain.Invalid("currency", "epay charges in CNY only")
	}
	if r.Amount <= 0 {
		return nil, domain.Invalid("amount", "must be positive")
	}
	if err := checkCallbackURL(r.NotifyURL, true); err != nil {
		return nil, domain.Invalid("notify_url", err.Error())
	}
	if r.ReturnURL != "" {
		if err := checkCallbackURL(r.ReturnURL, false); err != nil {
			return nil, domain.Invalid("return_url", err.Error())
		}
	}
	name := SafeName(r.Subject)
	if name == "" {
		name = string(r.OrderNo)
	}
	p := Params{
		"pid":          g.pid,
		"type":         g.typ,
		"out_trade_no": string(r.OrderNo),
		"notify_url":   r.NotifyURL,
		"name":         name,
		"money":        cny.Format(r.Amount),
	}
	if r.ReturnURL != "" {
		p["return_url"] = r.ReturnURL
	}
	if k := signable(p); k != "" {
		return nil, domain.Invalid(k, "epay cannot sign a value with '&', '=' or a control character")
	}
	return p, nil
}

// checkCallbackURL accepts an absolute http(s) URL. The notify URL must have no query: the
// gateway appends its signed parameters to it, and the verifier signs all it receives.
func checkCallbackURL(s string, noQuery bool) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return errors.New("must be an absolute http(s) URL")
	}
	if noQuery && (u.RawQuery != "" || u.ForceQuery) {
		return errors.New("must have no query: the gateway appends its parameters")
	}
	return nil
}

// encode renders p as a query string (sorted by key; values escaped as forms are).
func encode(p Params) string {
	v := make(url.Values, len(p))
	for k, val := range p {
		v.Set(k, val)
	}
	return v.Encode()
}
