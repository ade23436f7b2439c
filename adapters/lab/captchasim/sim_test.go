package captchasim_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"cardshop/adapters/lab/captchasim"
)

func post(t *testing.T, u, contentType, body string) map[string]any {
	t.Helper()
	resp, err := http.Post(u, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func code(m map[string]any) string {
	cs, _ := m["error-codes"].([]any)
	if len(cs) == 0 {
		return ""
	}
	return cs[0].(string)
}

// TestTurnstileTakesJSONAndReplaysAnIdempotentRetry: Turnstile reads a JSON body as well as a
// form; a second verification with the first one's idempotency_key gets the first answer, any
// other second verification is timeout-or-duplicate; "error-codes" is always present.
func TestTurnstileTakesJSONAndReplaysAnIdempotentRetry(t *testing.T) {
	s := captchasim.New(captchasim.Config{Dialect: captchasim.Turnstile, Secret: "sec", SiteKey: "key"})
	defer s.Close()
	tok := s.SolveFor("key", "shop.example", "buy", "c1")
	body, _ := json.Marshal(map[string]string{"secret": "sec", "response": tok, "idempotency_key": "k-1"})
	first := post(t, s.VerifyURL(), "application/json", string(body))
	if first["success"] != true || first["hostname"] != "shop.example" || first["action"] != "buy" || first["cdata"] != "c1" {
		t.Fatalf("first verification = %v", first)
	}
	if again := post(t, s.VerifyURL(), "application/json", string(body)); again["success"] != true {
		t.Fatalf("the idempotent retry = %v, want the first answer", again)
	}
	form := url.Values{"secret": {"sec"}, "response": {tok}, "idempotency_key": {"k-2"}}.Encode()
	if dup := post(t, s.VerifyURL(), "application/x-www-form-urlencoded", form); dup["success"] != false || code(dup) != "timeout-or-duplicate" {
		t.Fatalf("a replay with another key = %v, want timeout-or-duplicate", dup)
	}
	if m := post(t, s.VerifyURL(), "application/x-www-form-urlencoded", "response=x"); code(m) != "missing-input-secret" {
		t.Fatalf("no secret = %v", m)
	}
}

// TestHCaptchaTakesFormsOnly: hCaptcha refuses a JSON body as a bad request, and a GET.
func TestHCaptchaTakesFormsOnly(t *testing.T) {
	s := captchasim.New(captchasim.Config{Dialect: captchasim.HCaptcha, Secret: "sec", SiteKey: "key"})
	defer s.Close()
	tok := s.Solve("shop.example")
	if m := post(t, s.VerifyURL(), "application/json", `{"secret":"sec","response":"`+tok+`"}`); code(m) != "bad-request" {
		t.Fatalf("a JSON body = %v, want bad-request", m)
	}
	resp, err := http.Get(s.VerifyURL())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d, want 405", resp.StatusCode)
	}
	form := url.Values{"secret": {"sec"}, "response": {tok}, "sitekey": {"key"}}.Encode()
	if m := post(t, s.VerifyURL(), "application/x-www-form-urlencoded", form); m["success"] != true || m["hostname"] != "shop.example" {
		t.Fatalf("the token, as a form = %v", m)
	}
}
