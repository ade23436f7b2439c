package domain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// AlertChannelType is where an alert channel pushes: a Telegram chat through a bot, a WeCom
// (企业微信) group robot, an e-mail address or a signed webhook.
type AlertChannelType string

// The alert channel types.
const (
	ChannelTelegram AlertChannelType = "telegram"
	ChannelWeCom    AlertChannelType = "wecom"
	ChannelEmail    AlertChannelType = "email"
	ChannelWebhook  AlertChannelType = "webhook"
)

// AlertChannelTypes lists the channel types in the order a form offers them.
var AlertChannelTypes = []AlertChannelType{ChannelTelegram, ChannelWeCom, ChannelEmail, ChannelWebhook}

// TopicAlertPush is one alert (or stock event) for one alert channel: an AlertPush as the
// payload, the channel's id and the alert's as the key ("channel:alert"), recorded in the
// transaction that raises the alert and sent by the alert relay through the AlertPusher.
const TopicAlertPush = "alert.push"

// AlertChannel is a place the shop pushes alerts to, as an admin configured it in the console.
// Kinds filters the alert kinds it gets (empty: every kind); Stock adds the stock events
// (product.low_stock, .sold_out, .restocked). Secret is the bot token (Telegram), the robot's
// key (WeCom) or the signing secret (webhook): it never leaves the process but towards the
// channel itself, and operators see its Fingerprint only.
type AlertChannel struct {
	ID      int64
	Name    string
	Type    AlertChannelType
	Target  string // Telegram: the chat id; e-mail: the address; webhook: the https URL; WeCom: empty
	Secret  Secret
	Kinds   []string
	Stock   bool
	Enabled bool
	// The outcome of the newest push to the channel (a test included): when it went through,
	// and when and why the newest one failed for good (its last attempt, or a test).
	LastOKAt    time.Time
	LastErrorAt time.Time
	LastError   string
	UpdatedAt   time.Time
}

// Wants reports whether the channel takes an alert of kind (stock: a stock event of that type).
func (c AlertChannel) Wants(kind string, stock bool) bool {
	if !c.Enabled {
		return false
	}
	if stock {
		return c.Stock
	}
	return len(c.Kinds) == 0 || slices.Contains(c.Kinds, kind)
}

// Fingerprint names the channel's secret without revealing it: the first 8 hex digits of its
// SHA-256 and its last four characters ("3f9a1c02…ab12"); empty when there is none.
func (c AlertChannel) Fingerprint() string { return SecretFingerprint(c.Secret) }

// SecretFingerprint is AlertChannel.Fingerprint for any secret.
func SecretFingerprint(s Secret) string {
	v := s.Reveal()
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	r := []rune(v)
	last := ""
	if len(r) >= 12 { // a short secret keeps all of its characters hidden
		last = string(r[len(r)-4:])
	}
	return hex.EncodeToString(sum[:4]) + "…" + last
}

// The bounds of an alert channel's fields.
const (
	MaxChannelName   = 64
	MaxChannelTarget = 512
	MaxChannelSecret = 256
	MaxChannelKinds  = 32
	maxKindLen       = 64
)

var (
	telegramToken = regexp.MustCompile(`^[0-9]{1,20}:[A-Za-z0-9_-]{20,100}$`)
	telegramChat  = regexp.MustCompile(`^(-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$`)
	weComKey      = regexp.MustCompile(`^[A-Za-z0-9-]{8,64}$`)
	alertKind     = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,63}$`)
)

// ValidateAlertChannel checks an alert channel as an admin submits it (names trimmed by the
// caller) and returns it with its kinds sorted and unique. Each type needs its own fields: a
// Telegram bot token ("123456:ABC…") and chat id (a number or @channelname); a WeCom robot's key
// (the key= of its webhook address); an e-mail address; a webhook's https URL (http only
// for localhost) and a signing secret of at least 16 characters.
func ValidateAlertChannel(c AlertChannel) (AlertChannel, error) {
	if c.Name == "" || utf8.RuneCountInString(c.Name) > MaxChannelName || !utf8.ValidString(c.Name) ||
		strings.ContainsFunc(c.Name, unicode.IsControl) {
		return c, Invalid("name", "must be 1 to 64 characters of text")
	}
	if len(c.Target) > MaxChannelTarget || strings.ContainsFunc(c.Target, unicode.IsControl) {
		return c, Invalid("target", "must be at most 512 characters on one line")
	}
	if len(c.Secret.Reveal()) > MaxChannelSecret || strings.ContainsFunc(c.Secret.Reveal(), unicode.IsSpace) {
		return c, Invalid("secret", "must be at most 256 characters without spaces")
	}
	switch c.Type {
	case ChannelTelegram:
		if !telegramToken.MatchString(c.Secret.Reveal()) {
			return c, Invalid("secret", `must be a Telegram bot token, "123456789:" and the token BotFather gave`)
		}
		if !telegramChat.MatchString(c.Target) {
			return c, Invalid("target", "must be a Telegram chat id (a number, -100… for a group) or @channelname")
		}
	case ChannelWeCom:
		if !weComKey.MatchString(c.Secret.Reveal()) {
			return c, Invalid("secret", "must be the robot's key, the key= part of its webhook address")
		}
		if c.Target != "" {
			return c, Invalid("target", "must be empty for a WeCom robot")
		}
	case ChannelEmail:
		a, err := mail.ParseAddress(c.Target)
		if err != nil || a.Name != "" || a.Address != c.Target {
			return c, Invalid("target", "must be one e-mail address")
		}
		if c.Secret != "" {
			return c, Invalid("secret", "must be empty for e-mail")
		}
	case ChannelWebhook:
		u, err := url.Parse(c.Target)
		if err != nil || u.Host == "" || u.User != nil ||
			!(u.Scheme == "https" || u.Scheme == "http" && isLocalHost(u.Hostname())) {
			return c, Invalid("target", "must be an https URL (http only for localhost)")
		}
		if utf8.RuneCountInString(c.Secret.Reveal()) < 16 {
			return c, Invalid("secret", "must be a signing secret of at least 16 characters")
		}
	default:
		return c, Invalid("type", `must be "telegram", "wecom", "email" or "webhook"`)
	}
	if len(c.Kinds) > MaxChannelKinds {
		return c, Invalid("kinds", "must be at most 32 kinds")
	}
	kinds := make([]string, 0, len(c.Kinds))
	for _, k := range c.Kinds {
		if len(k) > maxKindLen || !alertKind.MatchString(k) {
			return c, Invalid("kinds", fmt.Sprintf("%q is not an alert kind", k))
		}
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	c.Kinds = slices.Compact(kinds)
	return c, nil
}

func isLocalHost(h string) bool { return h == "localhost" || h == "127.0.0.1" || h == "::1" }

// ErrAlertChannelNotFound means no alert channel has that id.
var ErrAlertChannelNotFound = errors.New("alert channel not found")

// ErrAlertChannelExists means another alert channel has that name.
var ErrAlertChannelExists = errors.New("an alert channel of that name exists")

// AlertChannelRepo stores the alert channels.
type AlertChannelRepo interface {
	// Create stores c (its ID ignored) and returns its id; ErrAlertChannelExists for a taken
	// name.
	Create(ctx context.Context, c AlertChannel) (int64, error)
	// Update replaces the channel c.ID's settings (name, target, kinds, stock, enabled, and the
	// secret when c.Secret is not empty: an empty one keeps the stored secret), leaving its
	// outcome; ErrAlertChannelNotFound, ErrAlertChannelExists.
	Update(ctx context.Context, c AlertChannel) error
	// Channel returns one channel with its secret; ErrAlertChannelNotFound.
	Channel(ctx context.Context, id int64) (AlertChannel, error)
	// Channels lists every channel by id, with their secrets.
	Channels(ctx context.Context) ([]AlertChannel, error)
	// Remove deletes the channel; ErrAlertChannelNotFound. Its pushes still in the outbox are
	// dropped by the relay.
	Remove(ctx context.Context, id int64) error
	// RecordOutcome stores a push's outcome: LastOKAt = at when failure is empty, else
	// LastErrorAt = at and LastError = failure (clipped to 500 characters). An unknown id is
	// ignored (the channel was removed meanwhile).
	RecordOutcome(ctx context.Context, id int64, at time.Time, failure string) error
}

// AlertPush is one push to one channel: an alert, a stock event or a test message. ID is the
// same on every attempt ("alert-12", "stock-product.sold_out:1001:…", "test-…"): the e-mail's
// Message-ID and the webhook's event id, so a receiver can drop a copy; Telegram and WeCom
// take no idempotency key (see AlertPusher).
type AlertPush struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"` // the alert's kind or the stock event's type; "test" for a test
	Product   ProductID `json:"product_id,omitempty"`
	OrderNo   OrderNo   `json:"order_no,omitempty"`
	Message   string    `json:"message"`
	At        time.Time `json:"at"`
	Stock     bool      `json:"stock,omitempty"` // a stock event
	ChannelID int64     `json:"channel_id"`
}

// AlertPusher pushes alerts to channels (the Telegram Bot API, WeCom robots, SMTP, a signed
// webhook in production).
type AlertPusher interface {
	// Push sends p to c. An error means it was not delivered or that its outcome is unknown:
	// the relay tries again. A *PushRefusedError says the channel refuses it for good (an
	// invalid token or key, a chat the bot is not in): not tried again. A *RetryAfterError
	// says when the channel takes the next try (a rate limit).
	Push(ctx context.Context, c AlertChannel, p AlertPush) error
}

// PushRefusedError is a channel's definite refusal of a push: trying again cannot help until
// an admin changes the channel. Reason is the channel's own answer (its error code and text).
type PushRefusedError struct{ Reason string }

func (e *PushRefusedError) Error() string { return "refused by the channel: " + e.Reason }

// RetryAfterError is a channel's rate limit: the next try is welcome After from now.
type RetryAfterError struct {
	After  time.Duration
	Reason string
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("rate limited by the channel (retry after %s): %s", e.After, e.Reason)
}
