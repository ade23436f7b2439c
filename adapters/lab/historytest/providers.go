package historytest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	"cardshop/domain"
)

// The history's two payment providers, in process. Each keeps its own ledger of money — the
// payments its buyers made and the refunds it paid out, per order — which the checkpoints read
// as the provider's truth:
//
//   - "hpay" behaves like Stripe or Alipay: it closes an expired payment, and its refunds are
//     idempotent by refund number; a refund may answer pending and complete later, by the
//     provider's notification or when the shop asks again with the same number. It refuses a
//     second refund of a payment under another number (the money is gone).
//   - "hepay" behaves like an epay gateway: no close (an expired order stays payable at the
//     provider: late payments), no refund number (each refund call is a new refund); its refund
//     checks the trade and pays out in two steps with a gap between them, as a PHP gateway does
//     without a lock, so two refund calls at once both pay.
//
// Notifications are JSON bodies signed with HMAC-SHA256 in a header; each provider signs with
// its own key.
const (
	idemProvider domain.Provider = "hpay"
	epayProvider domain.Provider = "hepay"
	fakeSigHead                  = "X-History-Signature"
)

// fakeAccount is one order's payment at a fake provider.
type fakeAccount struct {
	ref        string
	amount     domain.Money
	currency   domain.Currency
	closed     bool      // closed at the provider: no longer payable
	closeFails bool      // the provider cannot be reached for a close (Close answers ErrUnavailable)
	paidAt     time.Time // when the buyer paid; zero while unpaid
	received   int       // payments received
	payouts    int       // refunds paid out
	// refunds are the idempotent provider's refunds by refund number; pendingNext makes the
	// next new one answer pending.
	refunds     map[string]*fakeRefund
	pendingNext bool
	refunded    bool // the epay-like provider's trade status after a refund
	events      int
}

type fakeRefund struct {
	ref     string
	pending bool
	refused bool
}

// fakeProvider is one in-process payment provider (see above); it implements
// domain.PaymentGateway.
type fakeProvider struct {
	name  domain.Provider
	key   []byte
	epay  bool
	clock domain.Clock

	mu       sync.Mutex
	rng      *rand.Rand
	seq      int
	accounts map[domain.OrderNo]*fakeAccount
}

func newFakeProvider(name domain.Provider, epay bool, clock domain.Clock, seed uint64) *fakeProvider {
	return &fakeProvider{name: name, key: []byte("history-" + string(name) + "-key-0123456789"), epay: epay, clock: clock,
		rng: rand.New(rand.NewPCG(seed, uint64(len(name)))), accounts: map[domain.OrderNo]*fakeAccount{}}
}

func (f *fakeProvider) Provider() domain.Provider     { return f.name }
func (f *fakeProvider) Supports(domain.Currency) bool { return true }

// RefundIdempotent is true for hpay, which keeps a refund by its number, and false for the
// epay-like provider, which pays out on every call.
func (f *fakeProvider) RefundIdempotent() bool { return !f.epay }

// Create opens the order's payment; asking again for the same order answers the same one.
func (f *fakeProvider) Create(_ context.Context, r domain.PaymentRequest) (domain.PaymentCreated, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[r.OrderNo]
	if !ok {
		f.seq++
		a = &fakeAccount{ref: fmt.Sprintf("%s-%d", f.name, f.seq), amount: r.Amount, currency: r.Currency, refunds: map[string]*fakeRefund{}}
		f.accounts[r.OrderNo] = a
	}
	return domain.PaymentCreated{ProviderRef: a.ref, PayURL: "https://" + string(f.name) + ".invalid/pay/" + a.ref}, nil
}

// fakeNotice is a notification's body.
type fakeNotice struct {
	OrderNo       string `json:"order_no"`
	Ref           string `json:"ref"`
	EventID       string `json:"event_id"`
	Status        string `json:"status"` // paid, or refund_succeeded
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	RefundNo      string `json:"refund_no,omitempty"`
	RefundRef     string `json:"refund_ref,omitempty"`
	CurrencyMinor int    `json:"exponent"`
}

func (f *fakeProvider) sign(body []byte) string {
	m := hmac.New(sha256.New, f.key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks the signature on the raw body and parses it.
func (f *fakeProvider) Verify(_ context.Context, in domain.InboundRequest) (domain.ProviderNotice, error) {
	got, err := hex.DecodeString(in.Header.Get(fakeSigHead))
	want, _ := hex.DecodeString(f.sign(in.Body))
	if err != nil || !hmac.Equal(got, want) {
		return domain.ProviderNotice{}, domain.ErrBadSignature
	}
	var n fakeNotice
	if err := json.Unmarshal(in.Body, &n); err != nil {
		return domain.ProviderNotice{}, domain.Invalid("body", "not a notification")
	}
	out := domain.ProviderNotice{OrderNo: domain.OrderNo(n.OrderNo), ProviderRef: n.Ref, EventID: n.EventID,
		Amount: domain.Money(n.Amount), Currency: domain.Currency{Code: n.Currency, Exponent: n.CurrencyMinor}}
	switch n.Status {
	case "paid":
		out.Outcome = domain.OutcomePaid
	case "refund_succeeded":
		out.RefundNo, out.RefundOutcome, out.ProviderRef = n.RefundNo, domain.RefundSucceeded, n.RefundRef
		out.Amount, out.Currency = 0, domain.Currency{}
	default:
		return domain.ProviderNotice{}, domain.Invalid("status", "unknown")
	}
	return out, nil
}

// Query answers the payment's state from the provider's own ledger.
func (f *fakeProvider) Query(_ context.Context, p domain.Payment) (domain.PaymentState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[p.OrderNo]
	if !ok {
		return domain.PaymentState{}, fmt.Errorf("%s: no trade for order %s", f.name, p.OrderNo)
	}
	st := domain.PaymentState{Outcome: domain.OutcomePending, ProviderRef: a.ref, Amount: a.amount, Currency: a.currency}
	switch {
	case !a.paidAt.IsZero():
		st.Outcome = domain.OutcomePaid
	case a.closed:
		st.Outcome = domain.OutcomeExpired
	}
	return st, nil
}

// Close makes the payment unpayable; the epay-like provider has no close.
func (f *fakeProvider) Close(_ context.Context, p domain.Payment) error {
	if f.epay {
		return domain.ErrUnsupported
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[p.OrderNo]
	switch {
	case !ok:
		return nil
	case !a.paidAt.IsZero():
		return domain.ErrAlreadyPaid
	case a.closeFails:
		return fmt.Errorf("%s close: %w", f.name, domain.ErrUnavailable)
	}
	a.closed = true
	return nil
}

// Refund returns the payment's money; see the providers' descriptions above.
func (f *fakeProvider) Refund(_ context.Context, p domain.Payment, r domain.RefundRequest) (domain.RefundState, error) {
	if f.epay {
		return f.epayRefund(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[p.OrderNo]
	if !ok || a.paidAt.IsZero() {
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: "trade not paid"}, nil
	}
	if rf, seen := a.refunds[r.RefundNo]; seen {
		if rf.pending && f.rng.IntN(2) == 0 {
			rf.pending = false // finished meanwhile: asking again tells
		}
		return rf.state(), nil
	}
	for _, rf := range a.refunds {
		if !rf.refused {
			rf := &fakeRefund{ref: fmt.Sprintf("%s-r%d", a.ref, len(a.refunds)+1), refused: true}
			a.refunds[r.RefundNo] = rf
			return domain.RefundState{Outcome: domain.RefundRefused, ProviderRef: rf.ref, Reason: "already refunded"}, nil
		}
	}
	pending := a.pendingNext || f.rng.IntN(2) == 0
	a.pendingNext = false
	rf := &fakeRefund{ref: fmt.Sprintf("%s-r%d", a.ref, len(a.refunds)+1), pending: pending}
	a.refunds[r.RefundNo] = rf
	a.payouts++
	return rf.state(), nil
}

func (rf *fakeRefund) state() domain.RefundState {
	switch {
	case rf.refused:
		return domain.RefundState{Outcome: domain.RefundRefused, ProviderRef: rf.ref, Reason: "already refunded"}
	case rf.pending:
		return domain.RefundState{Outcome: domain.RefundPending, ProviderRef: rf.ref}
	}
	return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: rf.ref}
}

// epayRefund checks the trade, then pays: two steps, as a gateway without a lock does them.
func (f *fakeProvider) epayRefund(p domain.Payment) (domain.RefundState, error) {
	f.mu.Lock()
	a, ok := f.accounts[p.OrderNo]
	if !ok || a.paidAt.IsZero() {
		f.mu.Unlock()
		return domain.RefundState{Outcome: domain.RefundRefused, Reason: "trade not paid"}, nil
	}
	if a.refunded {
		f.mu.Unlock()
		return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: a.ref}, nil
	}
	gap := time.Duration(200+f.rng.IntN(1800)) * time.Microsecond
	f.mu.Unlock()
	time.Sleep(gap)
	f.mu.Lock()
	defer f.mu.Unlock()
	a.payouts++
	a.refunded = true
	return domain.RefundState{Outcome: domain.RefundSucceeded, ProviderRef: a.ref}, nil
}

// The buyer's and the provider's own side, driven by the history.

// pay is the buyer paying the order's payment at the provider; false when it cannot be paid
// (none, closed, or paid already).
func (f *fakeProvider) pay(no domain.OrderNo) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[no]
	if !ok || a.closed || !a.paidAt.IsZero() {
		return false
	}
	a.paidAt = f.clock.Now()
	a.received++
	return true
}

// failCloses makes the provider unreachable for the payment's close.
func (f *fakeProvider) failCloses(no domain.OrderNo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.accounts[no]; ok {
		a.closeFails = true
	}
}

// pendNext makes the payment's next new refund answer pending.
func (f *fakeProvider) pendNext(no domain.OrderNo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.accounts[no]; ok {
		a.pendingNext = true
	}
}

// notification is a signed notification as the shop's HTTP server would receive it.
func (f *fakeProvider) notification(n fakeNotice) domain.InboundRequest {
	body, err := json.Marshal(n)
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set(fakeSigHead, f.sign(body))
	h.Set("Content-Type", "application/json")
	return domain.InboundRequest{Method: http.MethodPost, Header: domain.Header(h), Body: body}
}

// paidNotice is the notification of the order's paid payment; false when it is not paid.
func (f *fakeProvider) paidNotice(no domain.OrderNo) (domain.InboundRequest, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[no]
	if !ok || a.paidAt.IsZero() {
		return domain.InboundRequest{}, false
	}
	a.events++
	return f.notification(fakeNotice{OrderNo: string(no), Ref: a.ref, EventID: fmt.Sprintf("%s-e%d", a.ref, a.events),
		Status: "paid", Amount: int64(a.amount), Currency: a.currency.Code, CurrencyMinor: a.currency.Exponent}), true
}

// pendingRefund is a refund the idempotent provider has not finished.
type pendingRefund struct {
	no       domain.OrderNo
	refundNo string
}

func (f *fakeProvider) pendingRefunds() []pendingRefund {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []pendingRefund
	for no, a := range f.accounts {
		for rn, rf := range a.refunds {
			if rf.pending {
				out = append(out, pendingRefund{no, rn})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].no < out[j].no })
	return out
}

// completeRefund finishes a pending refund and returns the notification that says so.
func (f *fakeProvider) completeRefund(pr pendingRefund) (domain.InboundRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[pr.no]
	if !ok || a.refunds[pr.refundNo] == nil {
		return domain.InboundRequest{}, errors.New("no such refund")
	}
	rf := a.refunds[pr.refundNo]
	rf.pending = false
	a.events++
	return f.notification(fakeNotice{OrderNo: string(pr.no), Ref: a.ref, EventID: fmt.Sprintf("%s-e%d", a.ref, a.events),
		Status: "refund_succeeded", RefundNo: pr.refundNo, RefundRef: rf.ref}), nil
}

// money is the provider's ledger of one order's payment.
type money struct {
	paidAt   time.Time
	received int
	payouts  int
}

func (f *fakeProvider) money(no domain.OrderNo) (money, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[no]
	if !ok {
		return money{}, false
	}
	return money{paidAt: a.paidAt, received: a.received, payouts: a.payouts}, true
}
