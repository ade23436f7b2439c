package captchasim

import (
	"encoding/json"
	"mime"
	"net/http"
	"time"
)

// turnstile is Turnstile's siteverify: form or JSON in, JSON out, 200 for every answer about a
// token (a bad request included), 405 for another method.
func (s *Sim) turnstile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	f, ok := readFields(r, true)
	if !ok {
		writeJSON(w, turnstileFail("bad-request"))
		return
	}
	switch {
	case f["secret"] == "":
		writeJSON(w, turnstileFail("missing-input-secret"))
		return
	case f["secret"] != s.cfg.Secret:
		writeJSON(w, turnstileFail("invalid-input-secret"))
		return
	case f["response"] == "":
		writeJSON(w, turnstileFail("missing-input-response"))
		return
	case len(f["response"]) > MaxTurnstileToken:
		writeJSON(w, turnstileFail("invalid-input-response"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, known := s.tokens[f["response"]]
	switch {
	case !known || t.siteKey != s.cfg.SiteKey:
		writeJSON(w, turnstileFail("invalid-input-response"))
	case t.used && f["idempotency_key"] != "" && f["idempotency_key"] == t.idemKey:
		writeJSON(w, t.first) // a retry of the first verification: its answer again
	case t.used || s.cfg.Now().Sub(t.solvedAt) > TokenLifetime:
		writeJSON(w, turnstileFail("timeout-or-duplicate"))
	default:
		t.used, t.idemKey = true, f["idempotency_key"]
		t.first = map[string]any{"success": true, "error-codes": []string{}, "messages": []string{},
			"challenge_ts": t.solvedAt.UTC().Format(time.RFC3339Nano), "hostname": t.hostname,
			"action": t.action, "cdata": t.cdata}
		writeJSON(w, t.first)
	}
}

func turnstileFail(code string) map[string]any {
	return map[string]any{"success": false, "error-codes": []string{code}, "messages": []string{}}
}

// hcaptcha is hCaptcha's siteverify: form fields in (JSON is a bad request), JSON out.
func (s *Sim) hcaptcha(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	f, ok := readFields(r, false)
	if !ok {
		writeJSON(w, hcaptchaFail("bad-request"))
		return
	}
	switch {
	case f["secret"] == "":
		writeJSON(w, hcaptchaFail("missing-input-secret"))
		return
	case f["secret"] != s.cfg.Secret:
		writeJSON(w, hcaptchaFail("invalid-input-secret"))
		return
	case f["response"] == "":
		writeJSON(w, hcaptchaFail("missing-input-response"))
		return
	case f["sitekey"] != "" && f["sitekey"] != s.cfg.SiteKey:
		writeJSON(w, hcaptchaFail("sitekey-secret-mismatch"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, known := s.tokens[f["response"]]
	switch {
	case !known || f["sitekey"] != "" && t.siteKey != f["sitekey"]:
		writeJSON(w, hcaptchaFail("invalid-input-response"))
	case t.used:
		writeJSON(w, hcaptchaFail("already-seen-response"))
	case s.cfg.Now().Sub(t.solvedAt) > TokenLifetime:
		writeJSON(w, hcaptchaFail("expired-input-response"))
	default:
		t.used = true
		writeJSON(w, map[string]any{"success": true, "challenge_ts": t.solvedAt.UTC().Format(time.RFC3339),
			"hostname": t.hostname, "credit": false})
	}
}

func hcaptchaFail(code string) map[string]any {
	return map[string]any{"success": false, "error-codes": []string{code}}
}

// readFields reads a form body, or with jsonToo a JSON object of strings; ok is false for any
// other body.
func readFields(r *http.Request, jsonToo bool) (map[string]string, bool) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	out := map[string]string{}
	switch {
	case ct == "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, false
		}
		for k := range r.PostForm {
			out[k] = r.PostForm.Get(k)
		}
		return out, true
	case ct == "application/json" && jsonToo:
		r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
		if err := json.NewDecoder(r.Body).Decode(&out); err != nil {
			return nil, false
		}
		return out, true
	}
	return nil, false
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
