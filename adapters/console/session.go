package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"cardshop/domain"
)

// CookieName is the console's session cookie.
const CookieName = "cardshop_console"

// SessionTTL is how long a console session lasts: a working day. There is no sliding renewal:
// an operator logs in again each day, which bounds what a stolen cookie is worth.
const SessionTTL = 8 * time.Hour

// session is the cookie's payload. It holds no role: the role is read fresh on every request,
// so a demotion applies at once. The CSRF token is in it because the session is stateless;
// the payload is signed, not encrypted — it holds nothing a cookie thief could not get anyway
// (the CSRF token is in every page's forms).
type session struct {
	Name     domain.OperatorName `json:"n"`
	IssuedAt int64               `json:"iat"` // Unix microseconds, as the ledger keeps rotated_at
	Expires  int64               `json:"exp"` // Unix microseconds
	CSRF     string              `json:"csrf"`
	// Admin binds a session of the shared admin token to that token (a keyed fingerprint of
	// it): replacing CARDSHOP_ADMIN_TOKEN logs its sessions out, as rotating an operator does.
	Admin string `json:"adm,omitempty"`
}

// sealer signs and checks session cookies with a key derived from CARDSHOP_TOKEN_SECRET (its
// own key, so a cookie can never pass for a buyer token or the reverse).
type sealer struct{ key []byte }

func newSealer(secret string) sealer {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("console-session v1"))
	return sealer{key: m.Sum(nil)}
}

func (s sealer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// adminPrint is the keyed fingerprint of the shared admin token kept in its sessions.
func (s sealer) adminPrint(adminToken string) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("admin-token\x00" + adminToken)[:16])
}

func (s sealer) seal(v session) string {
	b, _ := json.Marshal(v) // a struct of strings and integers always encodes
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

var errBadSession = errors.New("console: no valid session")

// open checks the cookie's MAC (in constant time) and its expiry, then decodes it.
func (s sealer) open(cookie string, now time.Time) (session, error) {
	payload, sig, ok := strings.Cut(cookie, ".")
	if !ok {
		return session{}, errBadSession
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(payload)) {
		return session{}, errBadSession
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return session{}, errBadSession
	}
	var v session
	if json.Unmarshal(b, &v) != nil || v.CSRF == "" || now.UnixMicro() >= v.Expires {
		return session{}, errBadSession
	}
	return v, nil
}

func newCSRF() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// csrfOK compares a form's token with the session's in constant time.
func csrfOK(form, want string) bool {
	return form != "" && subtle.ConstantTimeCompare([]byte(form), []byte(want)) == 1
}
