package console_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// forgedCookie builds a session cookie for name signed with a key derived from secret the way
// the console derives it, or with no MAC check at all possible when secret is "" (a bare
// payload with a made-up MAC): what an attacker without the service's secret can make.
func forgedCookie(t *testing.T, secret, name string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"n": name, "iat": time.Now().UnixMicro(),
		"exp": time.Now().Add(time.Hour * 24 * 365 * 10).UnixMicro(), "csrf": "x"})
	payload := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("console-session v1"))
	key := m.Sum(nil)
	if secret == "" {
		key = []byte("guess")
	}
	m = hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
