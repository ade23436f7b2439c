// Package webhook sends cardshop's events to the storefront's HTTPS endpoint: a JSON POST
// signed the way payment callbacks are (X-Cardshop-Timestamp, and X-Cardshop-Signature = hex
// HMAC-SHA256 of "timestamp.body" with the webhook secret, see package paysig). It implements
// domain.Notifier; the outbox relay retries a failed notification with a backoff.
//
// A delivery is accepted by any 2xx answer. Anything else (another status, a redirect, which
// is not followed, a timeout, a refused connection) is a failure to try again later. The
// receiver must answer within the timeout and should de-duplicate by the event id: delivery is
// at least once.
//
// It imports the domain, paysig and the standard library only.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cardshop/adapters/paysig"
	"cardshop/domain"
)

// Headers of a webhook request, beside the signature headers of package paysig.
const (
	HeaderEventID   = "X-Cardshop-Event-Id"
	HeaderEventType = "X-Cardshop-Event-Type"
	HeaderAttempt   = "X-Cardshop-Attempt"
)

// DefaultTimeout bounds one attempt: connect, send and the receiver's answer.
const DefaultTimeout = 10 * time.Second

// maxErrorBody is how much of a refusal's body is quoted in the error (and the log).
const maxErrorBody = 256

// Event is the JSON body of a webhook request.
type Event struct {
	ID        string          `json:"id"`         // the same on every attempt
	Type      string          `json:"type"`       // "order.delivered", "product.low_stock", "product.sold_out", "product.restocked"
	CreatedAt time.Time       `json:"created_at"` // when the event happened
	Data      json.RawMessage `json:"data"`       // a domain.DeliveryEvent for order.delivered, else a domain.StockEvent
}

// Config configures a Client.
type Config struct {
	URL    string // https://…; http:// only to a loopback host (a local receiver, tests)
	Secret string // at least paysig.MinSecretLength characters, shared with the receiver
	// Timeout bounds one attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests (its transport, its TLS roots); nil means the default
	// transport. Either way redirects are not followed, and Timeout applies when the client
	// has none.
	HTTPClient *http.Client
	// Now is the clock of the signature's timestamp; nil means time.Now.
	Now func() time.Time
}

// Client posts notifications to one webhook URL. It is safe for concurrent use.
type Client struct {
	url    string
	signer *paysig.Signer
	http   *http.Client
	now    func() time.Time
}

var _ domain.Notifier = (*Client)(nil)

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if err := CheckURL(cfg.URL); err != nil {
		return nil, err
	}
	signer, err := paysig.New(cfg.Secret, 0)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("webhook timeout must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		*hc = *cfg.HTTPClient
	}
	if hc.Timeout == 0 {
		hc.Timeout = cfg.Timeout
	}
	// A redirect is a failure: the signature was made for this receiver, and following it
	// could send the event where the operator did not configure it.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Client{url: cfg.URL, signer: signer, http: hc, now: now}, nil
}

// CheckURL accepts an absolute https URL, or an http one whose host is loopback (localhost,
// 127.0.0.0/8, ::1), without user information or fragment.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() {
		return fmt.Errorf("webhook URL %q: want an absolute https:// URL", raw)
	}
	if u.User != nil || u.Fragment != "" {
		return fmt.Errorf("webhook URL %q: user information and fragments are not allowed", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("webhook URL %q: http:// is allowed for a loopback host only; use https://", raw)
	default:
		return fmt.Errorf("webhook URL %q: want an https:// URL", raw)
	}
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Notify posts n and returns nil once the receiver answered 2xx. Every failure wraps
// domain.ErrUnavailable.
func (c *Client) Notify(ctx context.Context, n domain.Notification) error {
	data := n.Data
	if len(data) == 0 {
		data = []byte("null")
	}
	body, err := json.Marshal(Event{ID: n.ID, Type: n.Type, CreatedAt: n.At.UTC(), Data: data})
	if err != nil {
		return fmt.Errorf("webhook %s: encode: %w", n.ID, err)
	}
	ts := strconv.FormatInt(c.now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", n.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cardshop-webhook/1")
	req.Header.Set(paysig.HeaderTimestamp, ts)
	req.Header.Set(paysig.HeaderSignature, c.signer.Sign(ts, body))
	req.Header.Set(HeaderEventID, n.ID)
	req.Header.Set(HeaderEventType, n.Type)
	req.Header.Set(HeaderAttempt, strconv.Itoa(max(n.Attempt, 1)))
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w: %w", n.ID, domain.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read a little of the body so that the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return fmt.Errorf("webhook %s: %w: the receiver answered %s: %q", n.ID, domain.ErrUnavailable, resp.Status,
		strings.TrimSpace(string(snippet)))
}
