// Package authtoken issues and checks buyer tokens: "v1.<buyer>.<expiry>.<mac>", where mac is
// HMAC-SHA256 (base64url) over "v1.<buyer>.<expiry>" with the token secret. A storefront
// obtains one per logged-in user from the admin endpoint (or the `token` command) and sends it
// as "Authorization: Bearer <token>"; the buyer id in it scopes orders, idempotency keys and
// per-buyer limits. Tokens are stateless; rotating the secret revokes them all.
//
// It imports the domain and the standard library only.
package authtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"cardshop/domain"
)

// MinSecretLength is the shortest accepted token secret.
const MinSecretLength = 16

// MaxTTL is the longest lifetime a token may be issued for.
const MaxTTL = 30 * 24 * time.Hour

// Issuer issues and verifies buyer tokens.
type Issuer struct {
	secret []byte

	// verified holds the tokens whose MAC and buyer id this Issuer has checked, by the token
	// string: the buyer and the expiry read from it. A token's MAC is a function of the token
	// and the secret, which is fixed for the Issuer's life, so a token found here needs only
	// its expiry compared again (the HMAC was ~18% of a sold-out answer's CPU in process). At
	// verifiedMax entries the map is emptied: a sale's active buyers fit, and a flood of
	// distinct valid tokens costs the checks it would have cost without it.
	mu       sync.RWMutex
	verified map[string]verifiedToken
}

// verifiedToken is what Verify read from a token that passed its checks.
type verifiedToken struct {
	buyer domain.BuyerID
	exp   int64 // unix seconds: valid while now < exp
}

// verifiedMax bounds Issuer.verified: at most this many tokens (each ≤ 256 bytes) are kept.
const verifiedMax = 8192

// New returns an Issuer; a short secret is refused.
func New(secret string) (*Issuer, error) {
	if len(secret) < MinSecretLength {
		return nil, fmt.Errorf("token secret must be at least %d characters", MinSecretLength)
	}
	return &Issuer{secret: []byte(secret), verified: make(map[string]verifiedToken)}, nil
}

func (i *Issuer) mac(payload string) string {
	m := hmac.New(sha256.New, i.secret)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Issue returns a token for buyer valid until now+ttl.
func (i *Issuer) Issue(buyer domain.BuyerID, now time.Time, ttl time.Duration) (string, time.Time, error) {
	if _, err := domain.ParseBuyerID(string(buyer)); err != nil {
		return "", time.Time{}, err
	}
	if ttl <= 0 || ttl > MaxTTL {
		return "", time.Time{}, domain.Invalid("ttl", "must be between 1s and 720h")
	}
	exp := now.Add(ttl).Truncate(time.Second)
	payload := "v1." + string(buyer) + "." + strconv.FormatInt(exp.Unix(), 10)
	return payload + "." + i.mac(payload), exp, nil
}

// Verify returns the buyer of a valid, unexpired token, or ErrUnauthorized.
func (i *Issuer) Verify(token string, now time.Time) (domain.BuyerID, error) {
	if len(token) > 256 {
		return "", domain.ErrUnauthorized
	}
	i.mu.RLock()
	v, ok := i.verified[token]
	i.mu.RUnlock()
	if ok {
		if !now.Before(time.Unix(v.exp, 0)) {
			return "", domain.ErrUnauthorized
		}
		return v.buyer, nil
	}
	parts := strings.Split(token, ".")
	if len(parts) < 4 || parts[0] != "v1" {
		return "", domain.ErrUnauthorized
	}
	// A buyer id may contain dots: the expiry and mac are the last two parts.
	mac := parts[len(parts)-1]
	expText := parts[len(parts)-2]
	buyer := strings.Join(parts[1:len(parts)-2], ".")
	payload := "v1." + buyer + "." + expText
	if !hmac.Equal([]byte(mac), []byte(i.mac(payload))) {
		return "", domain.ErrUnauthorized
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return "", domain.ErrUnauthorized
	}
	id, err := domain.ParseBuyerID(buyer)
	if err != nil {
		return "", domain.ErrUnauthorized
	}
	i.mu.Lock()
	if len(i.verified) >= verifiedMax {
		clear(i.verified)
	}
	i.verified[strings.Clone(token)] = verifiedToken{buyer: id, exp: exp}
	i.mu.Unlock()
	return id, nil
}

// cached returns how many verified tokens the Issuer holds (for tests).
func (i *Issuer) cached() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.verified)
}
