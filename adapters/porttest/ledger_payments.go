package porttest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// runPayments checks the payment repository: Create and the reads, a refused second payment of
// an order at a provider, unknown payments, refused values, Transition (it wins once and only
// from the stored status, keeps the amount, currency and creation time, and of 20 concurrent
// attempts exactly one wins), the refund's fields and the operator's decision stored with it,
// and the rollback of a failed transaction.
func runPayments(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("create then read; an order's payments oldest first", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		no := newOrderNo()
		later := newPayment(t, no, "pt-a", at.Add(time.Minute))
		later.ProviderRef, later.PayURL, later.QRCode = "ref-"+string(no), "https://pay.example/"+string(no), "qr:"+string(no)
		earlier := newPayment(t, no, "pt-b", at)
		createPayment(t, l, later)
		createPayment(t, l, earlier)
		createPayment(t, l, newPayment(t, newOrderNo(), "pt-a", at)) // another order's
		wantPayment(t, l, later)
		wantPayment(t, l, earlier)
		got, err := l.Payments().OfOrder(t.Context(), no)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || paymentRecord(got[0]) != paymentRecord(earlier) || paymentRecord(got[1]) != paymentRecord(later) {
			t.Fatalf("OfOrder = %+v, want %+v then %+v", got, paymentRecord(earlier), paymentRecord(later))
		}
		if none, err := l.Payments().OfOrder(t.Context(), newOrderNo()); err != nil || len(none) != 0 {
			t.Fatalf("OfOrder(unknown) = %+v, %v; want none", none, err)
		}
	})

	t.Run("a second payment of the order at the provider is refused; at another provider it is not", func(t *testing.T) {
		l := newLedger(t)
		p := newPayment(t, newOrderNo(), "pt-a", now())
		createPayment(t, l, p)
		dup := p
		dup.Amount, dup.ProviderRef, dup.Status = p.Amount+1, "other", domain.PaymentPaid
		if err := l.Payments().Create(t.Context(), dup); !errors.Is(err, domain.ErrPaymentExists) {
			t.Fatalf("Create of a second payment: err = %v, want ErrPaymentExists", err)
		}
		wantPayment(t, l, p)
		createPayment(t, l, newPayment(t, p.OrderNo, "pt-b", now()))
	})

	t.Run("unknown payments are not found", func(t *testing.T) {
		l := newLedger(t)
		p := newPayment(t, newOrderNo(), "pt-a", now())
		if _, err := l.Payments().Payment(t.Context(), p.OrderNo, p.Provider); !errors.Is(err, domain.ErrPaymentNotFound) {
			t.Fatalf("Payment(unknown): err = %v, want ErrPaymentNotFound", err)
		}
		createPayment(t, l, p)
		if _, err := l.Payments().Payment(t.Context(), p.OrderNo, "pt-b"); !errors.Is(err, domain.ErrPaymentNotFound) {
			t.Fatalf("Payment(the order at another provider): err = %v, want ErrPaymentNotFound", err)
		}
		stranger := newPayment(t, newOrderNo(), "pt-a", now())
		stranger.Status = domain.PaymentPaid
		if _, err := l.Payments().Transition(t.Context(), stranger, domain.PaymentOpen); !errors.Is(err, domain.ErrPaymentNotFound) {
			t.Fatalf("Transition of an unknown payment: err = %v, want ErrPaymentNotFound", err)
		}
	})

	t.Run("values a payment cannot have are refused", func(t *testing.T) {
		l := newLedger(t)
		base := newPayment(t, newOrderNo(), "pt-a", now())
		for name, change := range map[string]func(p *domain.Payment){
			"no order":         func(p *domain.Payment) { p.OrderNo = "" },
			"no provider":      func(p *domain.Payment) { p.Provider = "" },
			"unknown status":   func(p *domain.Payment) { p.Status = 0 },
			"zero amount":      func(p *domain.Payment) { p.Amount = 0 },
			"negative amount":  func(p *domain.Payment) { p.Amount = -1 },
			"no currency":      func(p *domain.Payment) { p.Currency = domain.Currency{} },
			"unknown currency": func(p *domain.Payment) { p.Currency = domain.Currency{Code: "XXX", Exponent: 2} },
			"wrong exponent":   func(p *domain.Payment) { p.Currency.Exponent = 3 },
			"no creation time": func(p *domain.Payment) { p.CreatedAt = time.Time{} },
		} {
			p := base
			change(&p)
			var ve *domain.ValidationError
			if err := l.Payments().Create(t.Context(), p); !errors.As(err, &ve) {
				t.Errorf("Create with %s: err = %v, want a ValidationError", name, err)
			}
		}
		if _, err := l.Payments().Payment(t.Context(), base.OrderNo, base.Provider); !errors.Is(err, domain.ErrPaymentNotFound) {
			t.Fatalf("a refused payment is stored (err = %v)", err)
		}
	})

	t.Run("transition wins once and only from the stored status; amount, currency and creation stay", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		p := newPayment(t, newOrderNo(), "pt-a", at)
		createPayment(t, l, p)
		paid := p
		paid.Status, paid.ProviderRef, paid.UpdatedAt = domain.PaymentPaid, "ref-paid", at.Add(time.Minute)
		for i, want := range []bool{true, false} {
			won, err := l.Payments().Transition(t.Context(), paid, domain.PaymentOpen)
			if err != nil || won != want {
				t.Fatalf("Transition OPEN->PAID #%d = %v, %v; want %v, nil", i+1, won, err, want)
			}
		}
		wantPayment(t, l, paid)
		expired := p
		expired.Status, expired.UpdatedAt = domain.PaymentExpired, at.Add(2*time.Minute)
		if won, err := l.Payments().Transition(t.Context(), expired, domain.PaymentOpen); err != nil || won {
			t.Fatalf("Transition from a status the payment left = %v, %v; want false, nil", won, err)
		}
		if won, err := l.Payments().Transition(t.Context(), expired, domain.PaymentFailed); err != nil || won {
			t.Fatalf("Transition from a status the payment never had = %v, %v; want false, nil", won, err)
		}
		wantPayment(t, l, paid)

		other := newPayment(t, newOrderNo(), "pt-a", at)
		createPayment(t, l, other)
		for name, change := range map[string]func(p *domain.Payment){
			"amount":   func(p *domain.Payment) { p.Amount++ },
			"currency": func(p *domain.Payment) { p.Currency = currency(t, "USD") },
		} {
			next := other
			next.Status = domain.PaymentPaid
			change(&next)
			var ve *domain.ValidationError
			if won, err := l.Payments().Transition(t.Context(), next, domain.PaymentOpen); won || !errors.As(err, &ve) {
				t.Errorf("Transition changing the %s = %v, %v; want false and a ValidationError", name, won, err)
			}
		}
		wantPayment(t, l, other)
		moved := other
		moved.Status, moved.CreatedAt, moved.UpdatedAt = domain.PaymentFailed, at.Add(time.Hour), at.Add(time.Hour)
		if won, err := l.Payments().Transition(t.Context(), moved, domain.PaymentOpen); err != nil || !won {
			t.Fatalf("Transition OPEN->FAILED = %v, %v", won, err)
		}
		moved.CreatedAt = other.CreatedAt // never written by a transition
		wantPayment(t, l, moved)
	})

	t.Run("a refund's number, reference, reason and the operator's decision are stored with its transitions", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		p := newPayment(t, newOrderNo(), "pt-r", at)
		p.Status = domain.PaymentPaid
		createPayment(t, l, p)
		refunding := p
		refunding.Status, refunding.RefundNo, refunding.UpdatedAt = domain.PaymentRefunding, domain.RefundNoOf(p.OrderNo), at.Add(time.Minute)
		refunding.RefundVoid, refunding.RefundNote = true, strings.Repeat("界", domain.MaxRefundNote)
		if won, err := l.Payments().Transition(t.Context(), refunding, domain.PaymentPaid); err != nil || !won {
			t.Fatalf("Transition PAID->REFUNDING = %v, %v", won, err)
		}
		wantPayment(t, l, refunding)
		failed := refunding
		failed.Status, failed.RefundRef, failed.RefundReason = domain.PaymentRefundFailed, "re_1", "insufficient balance"
		if won, err := l.Payments().Transition(t.Context(), failed, domain.PaymentRefunding); err != nil || !won {
			t.Fatalf("Transition REFUNDING->REFUND_FAILED = %v, %v", won, err)
		}
		wantPayment(t, l, failed)
		done := failed
		done.Status, done.RefundReason = domain.PaymentRefunded, ""
		for i, want := range []bool{true, false} {
			if won, err := l.Payments().Transition(t.Context(), done, domain.PaymentRefundFailed); err != nil || won != want {
				t.Fatalf("Transition REFUND_FAILED->REFUNDED #%d = %v, %v; want %v", i+1, won, err, want)
			}
		}
		wantPayment(t, l, done)
		again := done
		again.Status, again.RefundVoid, again.RefundRecycle, again.RefundNote = domain.PaymentRefunding, false, true, "the buyer never used them"
		if won, err := l.Payments().Transition(t.Context(), again, domain.PaymentRefunded); err != nil || !won {
			t.Fatalf("Transition REFUNDED->REFUNDING with another decision = %v, %v", won, err)
		}
		wantPayment(t, l, again)
		// A move to the status the payment holds, with nothing else changed, wins while it holds
		// it (a fulfil keeps a refund out this way) and loses once it moved.
		if won, err := l.Payments().Transition(t.Context(), again, domain.PaymentRefunding); err != nil || !won {
			t.Fatalf("Transition REFUNDING->REFUNDING unchanged = %v, %v; want true", won, err)
		}
		if won, err := l.Payments().Transition(t.Context(), done, domain.PaymentRefunded); err != nil || won {
			t.Fatalf("Transition from REFUNDED, which the payment left = %v, %v; want false", won, err)
		}
		wantPayment(t, l, again)

		created := newPayment(t, newOrderNo(), "pt-r", at)
		created.Status, created.RefundNo, created.RefundRecycle, created.RefundNote = domain.PaymentRefunding, "x", true, "note"
		createPayment(t, l, created)
		wantPayment(t, l, created)
		for name, change := range map[string]func(p *domain.Payment){
			"void and recycle":  func(p *domain.Payment) { p.RefundVoid, p.RefundRecycle = true, true },
			"an over-long note": func(p *domain.Payment) { p.RefundNote = strings.Repeat("a", domain.MaxRefundNote+1) },
			"a note not UTF-8":  func(p *domain.Payment) { p.RefundNote = "\xff" },
		} {
			bad := again
			change(&bad)
			var ve *domain.ValidationError
			if won, err := l.Payments().Transition(t.Context(), bad, domain.PaymentRefunding); won || !errors.As(err, &ve) {
				t.Errorf("Transition with %s = %v, %v; want false and a ValidationError", name, won, err)
			}
		}
		wantPayment(t, l, again)
	})

	t.Run("race: 20 transitions of one payment from OPEN, exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		p := newPayment(t, newOrderNo(), "pt-a", at)
		createPayment(t, l, p)
		const n = 20
		targets := make([]domain.Payment, n)
		for i := range targets {
			next := p
			next.Status = []domain.PaymentStatus{domain.PaymentPaid, domain.PaymentExpired, domain.PaymentFailed}[i%3]
			next.ProviderRef, next.UpdatedAt = fmt.Sprintf("ref-%d", i), at.Add(time.Duration(i+1)*time.Second)
			targets[i] = next
		}
		wins := make([]bool, n)
		parallel(n, func(i int) {
			won, err := l.Payments().Transition(t.Context(), targets[i], domain.PaymentOpen)
			if err != nil {
				t.Error(err)
			}
			wins[i] = won
		})
		winner := -1
		for i, won := range wins {
			if won {
				if winner >= 0 {
					t.Fatalf("transitions %d and %d both won", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("no transition won")
		}
		wantPayment(t, l, targets[winner])
	})

	t.Run("a failed transaction leaves no payment and no transition behind", func(t *testing.T) {
		l := newLedger(t)
		at := now()
		kept := newPayment(t, newOrderNo(), "pt-a", at)
		createPayment(t, l, kept)
		created := newPayment(t, newOrderNo(), "pt-a", at)
		paid := kept
		paid.Status, paid.UpdatedAt = domain.PaymentPaid, at.Add(time.Minute)
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if err := tx.Payments().Create(t.Context(), created); err != nil {
				return err
			}
			if got, err := tx.Payments().Payment(t.Context(), created.OrderNo, created.Provider); err != nil ||
				paymentRecord(got) != paymentRecord(created) {
				t.Errorf("the transaction reads its own payment as %+v, %v", got, err)
			}
			if won, err := tx.Payments().Transition(t.Context(), paid, domain.PaymentOpen); err != nil || !won {
				t.Errorf("Transition in the transaction = %v, %v", won, err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Atomically: err = %v, want fn's error", err)
		}
		if _, err := l.Payments().Payment(t.Context(), created.OrderNo, created.Provider); !errors.Is(err, domain.ErrPaymentNotFound) {
			t.Fatalf("a payment created in a failed transaction survived (err = %v)", err)
		}
		if got, err := l.Payments().OfOrder(t.Context(), created.OrderNo); err != nil || len(got) != 0 {
			t.Fatalf("OfOrder after the rollback = %+v, %v; want none", got, err)
		}
		wantPayment(t, l, kept)
		// The number is free again, and a committed transaction keeps what it wrote.
		if err := l.Atomically(t.Context(), func(tx domain.Store) error {
			return tx.Payments().Create(t.Context(), created)
		}); err != nil {
			t.Fatal(err)
		}
		wantPayment(t, l, created)
	})
}

func currency(t *testing.T, code string) domain.Currency {
	t.Helper()
	c, err := domain.ParseCurrency(code)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newPayment is an OPEN payment of 1999 CNY for order no at provider, created at at.
func newPayment(t *testing.T, no domain.OrderNo, provider domain.Provider, at time.Time) domain.Payment {
	t.Helper()
	return domain.Payment{OrderNo: no, Provider: provider, Amount: 1999, Currency: currency(t, "CNY"),
		Status: domain.PaymentOpen, CreatedAt: at, UpdatedAt: at}
}

func createPayment(t *testing.T, l domain.Store, p domain.Payment) {
	t.Helper()
	if err := l.Payments().Create(t.Context(), p); err != nil {
		t.Fatalf("Create payment: %v", err)
	}
}

func paymentRecord(p domain.Payment) domain.Payment {
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p
}

func wantPayment(t *testing.T, l domain.Store, want domain.Payment) {
	t.Helper()
	got, err := l.Payments().Payment(t.Context(), want.OrderNo, want.Provider)
	if err != nil {
		t.Fatalf("Payment(%s, %s): %v", want.OrderNo, want.Provider, err)
	}
	if paymentRecord(got) != paymentRecord(want) {
		t.Fatalf("Payment(%s, %s) = %+v, want %+v", want.OrderNo, want.Provider, paymentRecord(got), paymentRecord(want))
	}
}
