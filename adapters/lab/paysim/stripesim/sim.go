// Package stripesim is a Stripe simulator for tests and the load check: an httptest server that
// answers the Checkout Session endpoints cardshop calls (create, retrieve, expire) and the
// refund endpoints (create, retrieve, list) with Stripe's JSON shapes, status codes and error
// objects, honours Idempotency-Key as Stripe does
// (the same key and parameters replay the first answer; the same key with other parameters is
// an idempotency_error), requires the secret key, and sends webhook events to a configured URL
// as real signed HTTP POSTs (Stripe-Signature: t=…,v1=… with one v1 per signing secret).
//
// Switches: Pay, PayDelayed/Settle, Fail, Expire change a session and deliver the matching
// event; Resend delivers the last event again; Hold queues events and Release sends them in
// any order; Drop loses the next events; SetDelay delays each delivery; Deliver sends an event
// forged in one of the Forgery ways; Outage answers every API call 503, Throttle 429;
// LoseReplies carries out the next calls but drops their replies, HangReplies carries them out
// and answers nothing until the client gives up. Requests, Sessions and Deliveries show what it
// received and sent.
//
// Refunds: a paid session has a payment_intent (pi_…) and a charge (ch_…); POST /v1/refunds
// refunds it, idempotently by key like every POST, refusing more than the unrefunded rest
// (charge_already_refunded, amount_too_large) and an unpaid intent. A refund causes
// refund.created and charge.refunded (with the charge's refunds list when
// Options.LegacyChargeRefunds). Switches: RefundPending answers pending until SettleRefund,
// which delivers refund.updated (succeeded) or refund.failed; RefundRefuse answers a 400 of a
// chosen code; RefundOutage answers 503. Payouts counts what went back to the buyer.
//
// Events caused by an API call (expiring a session) wait in the outbox until Flush, as Stripe
// sends them after the call's answer; the others are delivered by the call that causes them.
// A session past its expires_at reads as expired; that expiry sends no event.
//
// It is written from Stripe's public API reference, independently of package stripe: the
// gateway's tests check one against the other. It imports the domain, the simulators' courier
// and the standard library.
package stripesim

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cardshop/adapters/lab/paysim/courier"
	"cardshop/domain"
)

// APIVersion is the version written into events.
const APIVersion = "2025-07-30.basil"

// Options configures a Server.
type Options struct {
	// SecretKey is the key the API accepts (sk_test_… or sk_live_…; the mode of the objects).
	SecretKey string
	// WebhookSecrets sign events: each event carries one v1 signature per secret, as Stripe
	// does while an endpoint's secret rotates.
	WebhookSecrets []string
	// WebhookURL receives the events; SetWebhookURL changes it.
	WebhookURL string
	// Clock is the simulator's now. Nil: the wall clock.
	Clock domain.Clock
	// HTTPClient delivers events. Nil: a client with a 10 s timeout.
	HTTPClient *http.Client
	// SendV0 adds a v0 signature (another scheme, which receivers ignore) to every header.
	SendV0 bool
	// LegacyChargeRefunds embeds the charge's refunds list in charge.refunded events, as API
	// versions before 2022-11-15 did; current versions send the charge alone.
	LegacyChargeRefunds bool
}

// Session is a checkout session as the simulator holds it.
type Session struct {
	ID                string
	URL               string
	ClientReferenceID string
	Currency          string
	UnitAmount        int64
	Quantity          int64
	AmountTotal       int64
	ProductName       string
	SuccessURL        string
	CancelURL         string
	Metadata          map[string]string
	Status            string // open, complete, expired
	PaymentStatus     string // unpaid, paid
	PaymentIntent     string
	Charge            string // the charge of the payment, once complete
	Created           time.Time
	ExpiresAt         time.Time
	IdempotencyKey    string
}

// Request is one API request the simulator received.
type Request struct {
	Method         string
	Path           string
	Form           url.Values
	IdempotencyKey string
	ContentType    string
	AuthOK         bool // the secret key was presented
	Status         int  // the answer's status (also when the reply was lost)
	Replayed       bool // answered from the idempotency record
	Lost           bool // carried out, reply dropped
}

// Server is the simulator.
//
// Its courier (embedded) carries the webhook events: SetDelay, Drop, Hold, Held, Release,
// Resend, Outbox, Flush, Deliveries.
type Server struct {
	*courier.Courier[Note]

	// URL is the API's base URL (Config.BaseURL of the gateway).
	URL string

	srv        *httptest.Server
	opts       Options
	clock      domain.Clock
	livemode   bool
	mu         sync.Mutex
	sessions   map[string]*Session
	order      []string
	idem       map[string]idemRecord
	requests   []Request
	outage     bool
	throttle   bool
	lose       int
	webhookURL string
	hang       int
	hangPrefix string
	losePrefix string
	// refunds
	refunds       map[string]*Refund
	refundOrder   []string
	refundPending bool
	refundRefusal *apiError
	refundOutage  bool
}

type idemRecord struct {
	fingerprint string
	status      int
	body        []byte
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

var keyShape = regexp.MustCompile(`^(sk|rk)_(test|live)_[A-Za-z0-9]+$`)

// New starts a simulator; Close stops it.
func New(opts Options) (*Server, error) {
	if !keyShape.MatchString(opts.SecretKey) {
		return nil, errors.New("stripesim: SecretKey must look like sk_test_…")
	}
	if len(opts.WebhookSecrets) == 0 {
		return nil, errors.New("stripesim: at least one webhook secret")
	}
	s := &Server{opts: opts, clock: opts.Clock, livemode: strings.Contains(opts.SecretKey, "_live_"),
		sessions: map[string]*Session{}, idem: map[string]idemRecord{}, webhookURL: opts.WebhookURL,
		refunds: map[string]*Refund{}}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	s.Courier = courier.New(courier.Config[Note]{
		Client:       opts.HTTPClient,
		Seal:         s.seal,
		Acknowledged: func(status int, _ []byte) bool { return status >= 200 && status < 300 },
		Genuine:      func(n Note) bool { return n.Forgery == Genuine },
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.api)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client is an HTTP client for the API (with a timeout).
func (s *Server) Client() *http.Client {
	c := *s.srv.Client()
	c.Timeout = 10 * time.Second
	return &c
}

// SetWebhookURL sets where events go.
func (s *Server) SetWebhookURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhookURL = u
}

// Outage makes every API call answer 503 (on) or serve again (off). Nothing is recorded for
// an idempotency key during an outage.
func (s *Server) Outage(on bool) { s.set(func() { s.outage = on }) }

// Throttle makes every API call answer 429 rate_limit (on) or serve again (off).
func (s *Server) Throttle(on bool) { s.set(func() { s.throttle = on }) }

// LoseReplies makes the next n API calls take effect and then close the connection without an
// answer: the reply lost on the way back.
func (s *Server) LoseReplies(n int) { s.LoseRepliesTo("", n) }

// LoseRepliesTo is LoseReplies for the calls whose path starts with prefix only ("/v1/refunds").
func (s *Server) LoseRepliesTo(prefix string, n int) {
	s.set(func() { s.lose, s.losePrefix = n, prefix })
}

// ExpireIdempotencyKeys forgets every recorded idempotent answer, as Stripe does 24 hours after
// a key's first use: a request with an old key runs again.
func (s *Server) ExpireIdempotencyKeys() { s.set(func() { s.idem = map[string]idemRecord{} }) }

// HangReplies makes the next n API calls whose path starts with prefix ("" for every call)
// take effect and then answer nothing until the client gives up (its timeout or its context):
// a call that timed out after Stripe carried it out.
func (s *Server) HangReplies(prefix string, n int) {
	s.set(func() { s.hang, s.hangPrefix = n, prefix })
}

func (s *Server) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// Requests returns the API requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Sessions returns the sessions created so far, oldest first.
func (s *Server) Sessions() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Session, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.view(s.sessions[id]))
	}
	return out
}

// SessionOf returns the latest session of an order (its client_reference_id).
func (s *Server) SessionOf(orderNo string) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.latest(orderNo); ss != nil {
		return s.view(ss), true
	}
	return Session{}, false
}

func (s *Server) latest(orderNo string) *Session {
	for i := len(s.order) - 1; i >= 0; i-- {
		if ss := s.sessions[s.order[i]]; ss.ClientReferenceID == orderNo {
			s.lapse(ss)
			return ss
		}
	}
	return nil
}

// view copies a session for the caller.
func (s *Server) view(ss *Session) Session {
	s.lapse(ss)
	v := *ss
	v.Metadata = make(map[string]string, len(ss.Metadata))
	for k, val := range ss.Metadata {
		v.Metadata[k] = val
	}
	return v
}

// lapse expires an open session whose expires_at has passed.
func (s *Server) lapse(ss *Session) {
	if ss.Status == "open" && !s.clock.Now().Before(ss.ExpiresAt) {
		ss.Status = "expired"
	}
}

// apiError is Stripe's error object.
type apiError struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	Type    string `json:"type"`
}

func errorBody(e apiError) []byte {
	b, _ := json.Marshal(map[string]apiError{"error": e})
	return b
}

// reply is an API answer; keep says whether an idempotency key records it (Stripe records an
// answer once the endpoint began to run: not a refusal of the parameters).
type reply struct {
	status int
	body   []byte
	keep   bool
}

func ok(v any) reply {
	b, _ := json.Marshal(v)
	return reply{status: http.StatusOK, body: b, keep: true}
}

func invalid(status int, e apiError) reply {
	if e.Type == "" {
		e.Type = "invalid_request_error"
	}
	return reply{status: status, body: errorBody(e)}
}

// api serves every API request.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	form := r.PostForm
	if r.Method == http.MethodGet {
		form = r.URL.Query()
	}
	s.mu.Lock()
	rec := Request{Method: r.Method, Path: r.URL.Path, Form: form, IdempotencyKey: r.Header.Get("Idempotency-Key"),
		ContentType: r.Header.Get("Content-Type"), AuthOK: s.authorized(r)}
	rp, replayed := s.answer(r, form, rec)
	rec.Status, rec.Replayed = rp.status, replayed
	served := !s.outage && !s.throttle && rec.AuthOK && rp.status != http.StatusServiceUnavailable
	lose := served && s.lose > 0 && strings.HasPrefix(r.URL.Path, s.losePrefix)
	hang := served && !lose && s.hang > 0 && strings.HasPrefix(r.URL.Path, s.hangPrefix)
	if lose {
		s.lose--
		rec.Lost = true
	}
	if hang {
		s.hang--
		rec.Lost = true
	}
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	if lose {
		if hj, isHJ := w.(http.Hijacker); isHJ {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_"+randomID(14))
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(rp.status)
	_, _ = w.Write(rp.body)
}

// authorized accepts the key as a bearer token or as basic auth's user name.
func (s *Server) authorized(r *http.Request) bool {
	if user, _, ok := r.BasicAuth(); ok {
		return user == s.opts.SecretKey
	}
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return found && tok == s.opts.SecretKey
}

// answer runs the request under s.mu: outage, throttle, auth, idempotency, then the endpoint.
func (s *Server) answer(r *http.Request, form url.Values, rec Request) (reply, bool) {
	switch {
	case s.outage:
		return reply{status: http.StatusServiceUnavailable, body: errorBody(apiError{Type: "api_error",
			Message: "An error occurred with our connection to Stripe. Request was retried."})}, false
	case s.refundOutage && strings.HasPrefix(r.URL.Path, "/v1/refunds"):
		return reply{status: http.StatusServiceUnavailable, body: errorBody(apiError{Type: "api_error",
			Message: "An error occurred while processing the refund. Please retry."})}, false
	case s.throttle:
		return reply{status: http.StatusTooManyRequests, body: errorBody(apiError{Type: "invalid_request_error", Code: "rate_limit",
			Message: "Too many requests hit the API too quickly."})}, false
	case r.Header.Get("Authorization") == "":
		return invalid(http.StatusUnauthorized, apiError{Message: "You did not provide an API key."}), false
	case !rec.AuthOK:
		return invalid(http.StatusUnauthorized, apiError{Message: "Invalid API Key provided."}), false
	}
	key := rec.IdempotencyKey
	fingerprint := r.Method + " " + r.URL.Path + "?" + form.Encode()
	if key != "" && r.Method == http.MethodPost {
		if prev, seen := s.idem[key]; seen {
			if prev.fingerprint != fingerprint {
				return invalid(http.StatusBadRequest, apiError{Type: "idempotency_error", Message: fmt.Sprintf(
					"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.", key)}), false
			}
			return reply{status: prev.status, body: prev.body}, true
		}
	}
	rp := s.route(r, form, key)
	if key != "" && r.Method == http.MethodPost && rp.keep {
		s.idem[key] = idemRecord{fingerprint: fingerprint, status: rp.status, body: rp.body}
	}
	return rp, false
}

func (s *Server) route(r *http.Request, form url.Values, key string) reply {
	path := r.URL.Path
	if rest, isRefund := strings.CutPrefix(path, "/v1/refunds"); isRefund {
		return s.routeRefunds(r, form, key, rest)
	}
	rest, found := strings.CutPrefix(path, "/v1/checkout/sessions")
	switch {
	case found && rest == "" && r.Method == http.MethodPost:
		return s.create(form, key)
	case found && strings.HasPrefix(rest, "/") && r.Method == http.MethodGet && !strings.Contains(rest[1:], "/"):
		return s.retrieve(rest[1:])
	case found && strings.HasSuffix(rest, "/expire") && r.Method == http.MethodPost && strings.Count(rest, "/") == 2:
		return s.expire(strings.TrimSuffix(rest[1:], "/expire"))
	}
	return invalid(http.StatusNotFound, apiError{Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, path)})
}

var (
	lineItemParams = map[string]bool{
		"line_items[0][price_data][currency]": true, "line_items[0][price_data][unit_amount]": true,
		"line_items[0][price_data][product_data][name]": true, "line_items[0][quantity]": true,
	}
	topParams     = map[string]bool{"mode": true, "success_url": true, "cancel_url": true, "client_reference_id": true, "expires_at": true, "customer_email": true}
	metadataParam = regexp.MustCompile(`^metadata\[([^\[\]]{1,40})\]$`)
	currencyParam = regexp.MustCompile(`^[a-z]{3}$`)
)

func param(name, msg string) reply {
	return invalid(http.StatusBadRequest, apiError{Code: "parameter_invalid", Param: name, Message: msg})
}

// create is POST /v1/checkout/sessions for mode=payment with one price_data line item.
func (s *Server) create(form url.Values, key string) reply {
	meta := map[string]string{}
	for name, vs := range form {
		if len(vs) != 1 {
			return param(name, "Invalid value for "+name+": given more than once.")
		}
		if m := metadataParam.FindStringSubmatch(name); m != nil {
			if len(vs[0]) > 500 {
				return param(name, "Metadata values can have up to 500 characters.")
			}
			meta[m[1]] = vs[0]
			continue
		}
		if !lineItemParams[name] && !topParams[name] {
			return invalid(http.StatusBadRequest, apiError{Code: "parameter_unknown", Param: name, Message: "Received unknown parameter: " + name})
		}
	}
	if form.Get("mode") != "payment" {
		return param("mode", "The simulator offers mode=payment only.")
	}
	cur := form.Get("line_items[0][price_data][currency]")
	if !currencyParam.MatchString(cur) {
		return param("line_items[0][price_data][currency]", "Invalid currency: "+cur+". Stripe currently supports these currencies in lower case.")
	}
	unit, err := strconv.ParseInt(form.Get("line_items[0][price_data][unit_amount]"), 10, 64)
	if err != nil || unit < 1 || unit > 99999999 {
		return param("line_items[0][price_data][unit_amount]", "Invalid integer: unit_amount must be a positive integer of at most 8 digits.")
	}
	qty, err := strconv.ParseInt(form.Get("line_items[0][quantity]"), 10, 64)
	if err != nil || qty < 1 {
		return param("line_items[0][quantity]", "Invalid integer: quantity must be positive.")
	}
	name := form.Get("line_items[0][price_data][product_data][name]")
	if name == "" {
		return param("line_items[0][price_data][product_data][name]", "Missing required param: line_items[0][price_data][product_data][name].")
	}
	success := form.Get("success_url")
	if u, err := url.Parse(success); success == "" || err != nil || u.Host == "" {
		return param("success_url", "Not a valid URL")
	}
	if ref := form.Get("client_reference_id"); len(ref) > 200 {
		return param("client_reference_id", "client_reference_id can have up to 200 characters.")
	}
	now := s.clock.Now()
	expires := now.Add(24 * time.Hour)
	if raw := form.Get("expires_at"); raw != "" {
		sec, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return param("expires_at", "Invalid integer: "+raw)
		}
		expires = time.Unix(sec, 0)
		if expires.Before(now.Add(30 * time.Minute)) {
			return param("expires_at", "The `expires_at` timestamp must be at least 30 minutes from Checkout Session creation.")
		}
		if expires.After(now.Add(24 * time.Hour)) {
			return param("expires_at", "The `expires_at` timestamp must be less than 24 hours from Checkout Session creation.")
		}
	}
	mode := "test"
	if s.livemode {
		mode = "live"
	}
	ss := &Session{ID: "cs_" + mode + "_" + randomID(58), ClientReferenceID: form.Get("client_reference_id"), Currency: cur,
		UnitAmount: unit, Quantity: qty, AmountTotal: unit * qty, ProductName: name, SuccessURL: success,
		CancelURL: form.Get("cancel_url"), Metadata: meta, Status: "open", PaymentStatus: "unpaid",
		Created: now, ExpiresAt: expires, IdempotencyKey: key}
	ss.URL = s.URL + "/c/pay/" + ss.ID
	s.sessions[ss.ID] = ss
	s.order = append(s.order, ss.ID)
	return ok(s.object(ss))
}

func (s *Server) retrieve(id string) reply {
	ss, found := s.sessions[id]
	if !found {
		return invalid(http.StatusNotFound, apiError{Code: "resource_missing", Param: "session", Message: "No such checkout.session: '" + id + "'"})
	}
	s.lapse(ss)
	return ok(s.object(ss))
}

func (s *Server) expire(id string) reply {
	ss, found := s.sessions[id]
	if !found {
		return invalid(http.StatusNotFound, apiError{Code: "resource_missing", Param: "session", Message: "No such checkout.session: '" + id + "'"})
	}
	s.lapse(ss)
	if ss.Status != "open" {
		return reply{status: http.StatusBadRequest, keep: true, body: errorBody(apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Only Checkout Sessions with a status of open can be expired; this one is %s.", ss.Status)})}
	}
	ss.Status = "expired"
	s.Post(Note{Event: s.event(EventExpired, ss)})
	return ok(s.object(ss))
}

// sessionObject is a checkout.session as Stripe's API renders it (the fields cardshop's
// sessions have; null where Stripe writes null).
type sessionObject struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	AmountSubtotal    int64             `json:"amount_subtotal"`
	AmountTotal       int64             `json:"amount_total"`
	CancelURL         *string           `json:"cancel_url"`
	ClientReferenceID *string           `json:"client_reference_id"`
	Created           int64             `json:"created"`
	Currency          string            `json:"currency"`
	ExpiresAt         int64             `json:"expires_at"`
	Livemode          bool              `json:"livemode"`
	Metadata          map[string]string `json:"metadata"`
	Mode              string            `json:"mode"`
	PaymentIntent     *string           `json:"payment_intent"`
	PaymentStatus     string            `json:"payment_status"`
	Status            string            `json:"status"`
	SuccessURL        *string           `json:"success_url"`
	URL               *string           `json:"url"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// object renders a session; url is null once the session is no longer open.
func (s *Server) object(ss *Session) sessionObject {
	o := sessionObject{ID: ss.ID, Object: "checkout.session", AmountSubtotal: ss.AmountTotal, AmountTotal: ss.AmountTotal,
		CancelURL: orNull(ss.CancelURL), ClientReferenceID: orNull(ss.ClientReferenceID), Created: ss.Created.Unix(),
		Currency: ss.Currency, ExpiresAt: ss.ExpiresAt.Unix(), Livemode: s.livemode, Metadata: map[string]string{},
		Mode: "payment", PaymentIntent: orNull(ss.PaymentIntent), PaymentStatus: ss.PaymentStatus, Status: ss.Status,
		SuccessURL: orNull(ss.SuccessURL)}
	for k, v := range ss.Metadata {
		o.Metadata[k] = v
	}
	if ss.Status == "open" {
		o.URL = &ss.URL
	}
	return o
}

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomID is n random characters of [0-9A-Za-z], as Stripe's ids are.
func randomID(n int) string {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

// NewWebhookSecret returns a random webhook signing secret shaped like Stripe's.
func NewWebhookSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b)
}

// NewSecretKey returns a random test-mode secret key shaped like Stripe's.
func NewSecretKey() string { return "sk_test_" + randomID(40) }
