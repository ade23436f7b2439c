package domain

import (
	"context"
	"errors"
	"time"
)

// ErrBlocked means a buyer's address, e-mail address or e-mail domain is on a blocklist.
// Which one is never told to the buyer.
var ErrBlocked = errors.New("the buyer is blocked")

// ErrHumanCheckFailed means the buyer's human-check token is missing, forged, used before,
// expired or meant for another site.
var ErrHumanCheckFailed = errors.New("the human check failed")

// ErrHumanCheckUnavailable means the human-check provider could not be reached (or answered
// with an error of its own) and the shop refuses orders it cannot check (fail closed).
var ErrHumanCheckUnavailable = errors.New("the human check is unavailable")

// HumanVerdict is a provider's answer about one token.
type HumanVerdict struct {
	// Success is true when the provider vouched for the token and it was meant for this
	// site (its hostname, and for hCaptcha its site key, are the configured ones).
	Success bool
	// Codes are the provider's error codes ("timeout-or-duplicate", …) and the adapter's own
	// ("hostname-mismatch", "sitekey-mismatch", "missing-input-response"), for logs.
	Codes       []string
	ChallengeAt time.Time // when the challenge was solved, as the provider says
	Hostname    string    // the site the challenge was solved on, as the provider says
}

// HumanWidget is what a page needs to show the human check's widget: the provider's name
// ("turnstile", "hcaptcha") and the site key. Neither is secret.
type HumanWidget struct {
	Provider string
	SiteKey  string
}

// HumanCheck verifies a human-check token (Cloudflare Turnstile, hCaptcha) with its provider,
// server side.
type HumanCheck interface {
	// Widget is the widget the pages show for this check.
	Widget() HumanWidget
	// Verify asks the provider about token, solved by a browser at remoteIP (empty when not
	// known). A verdict without Success is an answer, not an error: an empty token is refused
	// without a call. The error is ErrHumanCheckUnavailable when the provider could not be
	// reached within the adapter's bound, answered with a server error or with something that
	// does not parse, or refused the site's own secret (a configuration the buyer cannot fix).
	Verify(ctx context.Context, token, remoteIP string) (HumanVerdict, error)
}
