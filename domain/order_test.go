package domain_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"
	"time"

	"cardshop/domain"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testAmount  = domain.Money(1998)
	testTimeout = 15 * time.Minute
)

// orderIn returns an order of 2 codes at 9.99 (amount 19.98), placed at t0, in status st.
func orderIn(st domain.OrderStatus) domain.Order {
	return domain.RehydrateOrder(domain.OrderRecord{No: "250301120000123412345678901", Buyer: "alice",
		Product: 7, Qty: 2, UnitPrice: 999, Amount: testAmount, IdemKey: "key-00000001", Status: st,
		CreatedAt: t0, ExpiresAt: t0.Add(testTimeout), UpdatedAt: t0})
}

// moveTo calls the Order method that leads to status to, at a time after the order's expiry
// and with the order's own amount, so that only the state machine decides. ok is false when
// no method leads to to (PENDING is only ever the start).
func moveTo(o *domain.Order, to domain.OrderStatus, at time.Time) (ok bool, err error) {
	switch to {
	case domain.StatusPaid:
		return true, o.MarkPaid(at, o.Amount(), "pay-1")
	case domain.StatusClosed:
		return true, o.Close(at)
	case domain.StatusFailed:
		return true, o.Fail(at, "card declined")
	case domain.StatusUnfulfilled:
		return true, o.MarkUnfulfilled(at, o.Amount(), "pay-1", "pool short")
	case domain.StatusRefunded:
		return true, o.Refund(at, "operator")
	default:
		return false, nil
	}
}

// allowed is the state machine of docs/PRODUCT.md, written out independently of the domain's
// table.
var allowed = map[[2]domain.OrderStatus]bool{
	{domain.StatusPending, domain.StatusPaid}:         true,
	{domain.StatusPending, domain.StatusClosed}:       true,
	{domain.StatusPending, domain.StatusFailed}:       true,
	{domain.StatusPending, domain.StatusUnfulfilled}:  true,
	{domain.StatusClosed, domain.StatusPaid}:          true,
	{domain.StatusClosed, domain.StatusUnfulfilled}:   true,
	{domain.StatusFailed, domain.StatusPaid}:          true,
	{domain.StatusFailed, domain.StatusUnfulfilled}:   true,
	{domain.StatusPaid, domain.StatusRefunded}:        true,
	{domain.StatusUnfulfilled, domain.StatusPaid}:     true,
	{domain.StatusUnfulfilled, domain.StatusRefunded}: true,
}

func TestEveryTransitionPair(t *testing.T) {
	if len(domain.AllOrderStatuses) != 6 {
		t.Fatalf("AllOrderStatuses has %d states; this table expects 6", len(domain.AllOrderStatuses))
	}
	after := t0.Add(testTimeout + time.Minute)
	for _, from := range domain.AllOrderStatuses {
		for _, to := range domain.AllOrderStatuses {
			want := allowed[[2]domain.OrderStatus{from, to}]
			t.Run(fmt.Sprintf("%s->%s", from, to), func(t *testing.T) {
				if got := domain.CanTransition(from, to); got != want {
					t.Fatalf("CanTransition = %v, want %v", got, want)
				}
				o := orderIn(from)
				before := o.Record()
				ok, err := moveTo(&o, to, after)
				if !ok {
					if want {
						t.Fatal("an allowed transition has no method")
					}
					return // nothing leads back to PENDING: CanTransition said no above
				}
				if want {
					if err != nil {
						t.Fatalf("allowed transition failed: %v", err)
					}
					if o.Status() != to {
						t.Fatalf("status = %s, want %s", o.Status(), to)
					}
					if !o.UpdatedAt().Equal(after) {
						t.Errorf("UpdatedAt = %v, want %v", o.UpdatedAt(), after)
					}
					return
				}
				if !errors.Is(err, domain.ErrInvalidTransition) {
					t.Fatalf("err = %v, want ErrInvalidTransition", err)
				}
				if o.Record() != before {
					t.Fatalf("a refused transition changed the order:\n got %+v\nwant %+v", o.Record(), before)
				}
			})
		}
	}
}

func TestUnknownStatusesNeverTransition(t *testing.T) {
	for _, s := range domain.AllOrderStatuses {
		if domain.CanTransition(0, s) || domain.CanTransition(s, 0) || domain.CanTransition(99, s) {
			t.Errorf("a transition from or to an unknown status is allowed (%s)", s)
		}
	}
}

func TestTransitionSideEffects(t *testing.T) {
	after := t0.Add(testTimeout)

	o := orderIn(domain.StatusPending)
	if err := o.MarkPaid(after, testAmount, "ref-9"); err != nil {
		t.Fatal(err)
	}
	if !o.PaidAt().Equal(after) || o.PaymentRef() != "ref-9" || o.Reason() != "" {
		t.Errorf("MarkPaid: paidAt %v ref %q reason %q", o.PaidAt(), o.PaymentRef(), o.Reason())
	}
	if err := o.Refund(after.Add(time.Hour), "asked"); err != nil {
		t.Fatal(err)
	}
	if !o.EndedAt().Equal(after.Add(time.Hour)) || o.Reason() != "asked" {
		t.Errorf("Refund: endedAt %v reason %q", o.EndedAt(), o.Reason())
	}

	o = orderIn(domain.StatusPending)
	if err := o.Close(after); err != nil { // exactly at expiry: due
		t.Fatalf("Close at expiry: %v", err)
	}
	if !o.EndedAt().Equal(after) || o.Reason() == "" {
		t.Errorf("Close: endedAt %v reason %q", o.EndedAt(), o.Reason())
	}

	o = orderIn(domain.StatusPending)
	if err := o.MarkUnfulfilled(after, testAmount, "ref-2", "pool short"); err != nil {
		t.Fatal(err)
	}
	if o.Reason() != "pool short" || o.PaymentRef() != "ref-2" || !o.PaidAt().Equal(after) {
		t.Errorf("MarkUnfulfilled: reason %q ref %q paidAt %v", o.Reason(), o.PaymentRef(), o.PaidAt())
	}
	// Fulfilled again, later: the exception's reason goes, the paid time stays the payment's.
	if err := o.MarkPaid(after.Add(time.Hour), testAmount, "ref-2"); err != nil || o.Reason() != "" ||
		!o.PaidAt().Equal(after) || !o.UpdatedAt().Equal(after.Add(time.Hour)) {
		t.Errorf("MarkPaid after UNFULFILLED: err %v reason %q paidAt %v updatedAt %v", err, o.Reason(), o.PaidAt(), o.UpdatedAt())
	}
}

func TestCloseBeforeExpiryIsNotDue(t *testing.T) {
	for _, at := range []time.Time{t0, t0.Add(testTimeout - time.Nanosecond)} {
		o := orderIn(domain.StatusPending)
		before := o.Record()
		err := o.Close(at)
		if !errors.Is(err, domain.ErrNotDue) {
			t.Fatalf("Close at %v: err = %v, want ErrNotDue", at, err)
		}
		if !errors.Is(err, domain.ErrInvalidTransition) {
			t.Errorf("ErrNotDue should match ErrInvalidTransition")
		}
		if o.Record() != before {
			t.Errorf("Close before expiry changed the order")
		}
	}
}

func TestWrongAmountLeavesOrderUnchanged(t *testing.T) {
	for _, from := range []domain.OrderStatus{domain.StatusPending, domain.StatusClosed, domain.StatusFailed, domain.StatusUnfulfilled} {
		for _, amount := range []domain.Money{0, testAmount - 1, testAmount + 1, -testAmount} {
			o := orderIn(from)
			before := o.Record()
			if err := o.MarkPaid(t0, amount, "x"); !errors.Is(err, domain.ErrAmountMismatch) {
				t.Errorf("%s MarkPaid(%d): err = %v, want ErrAmountMismatch", from, amount, err)
			}
			if err := o.MarkUnfulfilled(t0, amount, "x", "y"); !errors.Is(err, domain.ErrAmountMismatch) {
				t.Errorf("%s MarkUnfulfilled(%d): err = %v, want ErrAmountMismatch", from, amount, err)
			}
			if o.Record() != before {
				t.Errorf("%s: a mismatched payment changed the order", from)
			}
		}
	}
	if err := orderIn(domain.StatusPaid).CheckPayment(testAmount); err != nil {
		t.Errorf("CheckPayment of the exact amount: %v", err)
	}
}

func TestStatusNames(t *testing.T) {
	for _, s := range domain.AllOrderStatuses {
		back, err := domain.ParseOrderStatus(s.String())
		if err != nil || back != s {
			t.Errorf("%s does not round-trip: %v %v", s, back, err)
		}
	}
	if _, err := domain.ParseOrderStatus("pending"); err == nil {
		t.Error("ParseOrderStatus is case-insensitive; stored names are exact")
	}
	if got := domain.OrderStatus(42).String(); got != "OrderStatus(42)" {
		t.Errorf("unknown status String = %q", got)
	}
	holds := map[domain.OrderStatus]bool{domain.StatusPending: true, domain.StatusPaid: true}
	for _, s := range domain.AllOrderStatuses {
		if s.HoldsStock() != holds[s] {
			t.Errorf("%s.HoldsStock() = %v", s, s.HoldsStock())
		}
	}
	for _, s := range []domain.CardStatus{domain.CardUnsold, domain.CardSold, domain.CardRecycled, domain.CardVoid} {
		back, err := domain.ParseCardStatus(s.String())
		if err != nil || back != s {
			t.Errorf("card status %s does not round-trip", s)
		}
		if want := s == domain.CardUnsold || s == domain.CardRecycled; s.Sellable() != want {
			t.Errorf("%s.Sellable() = %v", s, s.Sellable())
		}
	}
}

func TestNewOrderNo(t *testing.T) {
	no := domain.NewOrderNo(t0, "alice", 123)
	if len(no) != 28 {
		t.Fatalf("order number %q has %d digits, want 28", no, len(no))
	}
	if _, err := domain.ParseOrderNo(string(no)); err != nil {
		t.Fatalf("a generated number does not parse: %v", err)
	}
	if no[:12] != "250301120000" {
		t.Errorf("order number %q does not start with the time", no)
	}
	if domain.NewOrderNo(t0, "alice", 124) == no || domain.NewOrderNo(t0, "bob", 123) == no {
		t.Error("different randomness or buyer gave the same number")
	}
	if got := domain.NewOrderNo(t0, "alice", ^uint64(0)); len(got) != 28 {
		t.Errorf("max random gives %d digits", len(got))
	}
}

// Codes are shown only from a PAID order; the first reveal's time stays, through later
// reveals, the refund and storage.
func TestMarkRevealed(t *testing.T) {
	first, later := t0.Add(time.Hour), t0.Add(2*time.Hour)
	for _, st := range domain.AllOrderStatuses {
		o := orderIn(st)
		err := o.MarkRevealed(first)
		if st != domain.StatusPaid {
			if !errors.Is(err, domain.ErrInvalidTransition) || o.Revealed() {
				t.Errorf("MarkRevealed of a %s order: %v, revealed %v; want ErrInvalidTransition, not revealed", st, err, o.Revealed())
			}
			continue
		}
		if err != nil || !o.RevealedAt().Equal(first) || !o.UpdatedAt().Equal(t0) {
			t.Fatalf("MarkRevealed of a PAID order: %v, revealed at %v, updated %v", err, o.RevealedAt(), o.UpdatedAt())
		}
		if err := o.MarkRevealed(later); err != nil || !o.RevealedAt().Equal(first) {
			t.Fatalf("second MarkRevealed: %v, revealed at %v; want the first time", err, o.RevealedAt())
		}
		if domain.RehydrateOrder(o.Record()) != o {
			t.Fatal("Record/RehydrateOrder lose RevealedAt")
		}
		if err := o.Refund(later, "operator"); err != nil || !o.RevealedAt().Equal(first) {
			t.Fatalf("refund: %v, revealed at %v; want the first time kept", err, o.RevealedAt())
		}
	}
}

// NewOrderNo's hand-made digits are exactly the format it documents: yyMMddHHmmss, the
// buyer's FNV-1a digest mod 10,000 in 4 digits, the random number mod 10^12 in 12.
func TestNewOrderNoFormat(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		at := time.Unix(r.Int64N(4_000_000_000), r.Int64N(1e9)).In(time.FixedZone("x", 3600*int(r.IntN(25)-12)))
		buyer := domain.BuyerID(fmt.Sprintf("buyer-%d-%x", i, r.Uint64()))
		random := r.Uint64()
		if i%7 == 0 {
			random %= 1000 // leading zeros
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(buyer))
		want := fmt.Sprintf("%s%04d%012d", at.UTC().Format("060102150405"), h.Sum32()%10000, random%1000000000000)
		if got := domain.NewOrderNo(at, buyer, random); string(got) != want {
			t.Fatalf("NewOrderNo(%s, %s, %d) = %s, want %s", at, buyer, random, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = domain.NewOrderNo(time.Now(), "buyer", 42) }); n > 1 {
		t.Fatalf("NewOrderNo allocates %.0f times, want at most 1 (the string)", n)
	}
}
