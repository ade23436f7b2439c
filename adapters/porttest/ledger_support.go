package porttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/domain"
)

// runSupport checks what the console's operator and order-support screens rest on: disabling
// operators, ActiveAdmins (and its lock inside a transaction: of racing demotions that each
// keep another admin, the last one stays), and the manual confirmations' claim of a provider's
// reference (one order per reference, also when claims race; a retry of the same order
// claims nothing twice; a rolled-back claim is gone).
func runSupport(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	t.Run("order search by number prefix, e-mail and provider reference", func(t *testing.T) { runSupportSearch(t, newLedger) })
	t.Run("disable and enable; ActiveAdmins lists enabled admins only", func(t *testing.T) {
		l := newLedger(t)
		prefix := newOperatorName()
		a := newOperator(prefix+"-a", domain.RoleAdmin, usec())
		b := newOperator(prefix+"-b", domain.RoleAdmin, usec())
		v := newOperator(prefix+"-v", domain.RoleViewer, usec())
		for _, o := range []domain.Operator{a, b, v} {
			createOperator(t, l, o)
		}
		if got := ourAdmins(t, l, prefix); len(got) != 2 || got[0] != a.Name || got[1] != b.Name {
			t.Fatalf("ActiveAdmins = %v, want %s and %s", got, a.Name, b.Name)
		}
		at := usec()
		if err := l.Operators().SetDisabled(t.Context(), a.Name, at); err != nil {
			t.Fatal(err)
		}
		got, err := l.Operators().Operator(t.Context(), a.Name)
		if err != nil || !got.Disabled() || !got.DisabledAt.Equal(at) || !sameOperator(got, a) {
			t.Fatalf("disabled: %+v, %v", got, err)
		}
		if got := ourAdmins(t, l, prefix); len(got) != 1 || got[0] != b.Name {
			t.Fatalf("ActiveAdmins with %s disabled = %v", a.Name, got)
		}
		if err := l.Operators().SetDisabled(t.Context(), a.Name, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Operators().Operator(t.Context(), a.Name); err != nil || got.Disabled() {
			t.Fatalf("enabled again: %+v, %v", got, err)
		}
		if err := l.Operators().SetDisabled(t.Context(), prefix+"-none", at); !errors.Is(err, domain.ErrOperatorNotFound) {
			t.Fatalf("SetDisabled(unknown) = %v, want ErrOperatorNotFound", err)
		}
	})

	t.Run("racing demotions that each keep another admin leave exactly one", func(t *testing.T) {
		l := newLedger(t)
		prefix := newOperatorName()
		const n = 8
		for i := range n {
			createOperator(t, l, newOperator(domain.OperatorName(fmt.Sprintf("%s-%d", prefix, i)), domain.RoleAdmin, usec()))
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := domain.OperatorName(fmt.Sprintf("%s-%d", prefix, i))
				err := l.Atomically(t.Context(), func(tx domain.Store) error {
					admins, err := tx.Operators().ActiveAdmins(t.Context())
					if err != nil {
						return err
					}
					ours := 0
					for _, a := range admins {
						if strings.HasPrefix(string(a), string(prefix)+"-") {
							ours++
						}
					}
					if ours < 2 {
						return domain.ErrLastAdmin
					}
					return tx.Operators().SetRole(t.Context(), me, domain.RoleOperator)
				})
				if err != nil && !errors.Is(err, domain.ErrLastAdmin) {
					t.Errorf("demote %s: %v", me, err)
				}
			}()
		}
		wg.Wait()
		if got := ourAdmins(t, l, prefix); len(got) != 1 {
			t.Fatalf("%d admins left of %d after racing demotions, want 1: %v", len(got), n, got)
		}
	})

	t.Run("a reference is claimed by one order; a retry of that order claims nothing twice", func(t *testing.T) {
		l := newLedger(t)
		no, other := newOrderNo(), newOrderNo()
		ref := fmt.Sprintf("pt-ref-%016x", rand.Uint64())
		m := domain.ManualPayment{OrderNo: no, Provider: "pt-a", Reference: ref, Operator: "pt-op",
			Note: "note", Queried: "paid", At: usec()}
		if won, err := l.Payments().ClaimManual(t.Context(), m); err != nil || !won {
			t.Fatalf("first claim = %v, %v", won, err)
		}
		if won, err := l.Payments().ClaimManual(t.Context(), m); err != nil || won {
			t.Fatalf("retry of the same order = %v, %v; want false, nil", won, err)
		}
		o := m
		o.OrderNo = other
		if _, err := l.Payments().ClaimManual(t.Context(), o); !errors.Is(err, domain.ErrReferenceUsed) {
			t.Fatalf("another order's claim = %v, want ErrReferenceUsed", err)
		}
		o.Provider = "pt-b" // the same words at another provider are another reference
		if won, err := l.Payments().ClaimManual(t.Context(), o); err != nil || !won {
			t.Fatalf("claim at another provider = %v, %v", won, err)
		}
		got, err := l.Payments().ManualOf(t.Context(), no)
		if err != nil || len(got) != 1 || got[0].Reference != ref || got[0].Operator != "pt-op" ||
			got[0].Note != "note" || got[0].Queried != "paid" || !got[0].At.Equal(m.At) {
			t.Fatalf("ManualOf = %+v, %v", got, err)
		}
	})

	t.Run("a reference another order's payment has is used", func(t *testing.T) {
		l := newLedger(t)
		p := newPayment(t, newOrderNo(), "pt-a", now())
		p.ProviderRef = fmt.Sprintf("pt-ref-%016x", rand.Uint64())
		createPayment(t, l, p)
		m := domain.ManualPayment{OrderNo: newOrderNo(), Provider: "pt-a", Reference: p.ProviderRef, Operator: "pt-op", At: usec()}
		if _, err := l.Payments().ClaimManual(t.Context(), m); !errors.Is(err, domain.ErrReferenceUsed) {
			t.Fatalf("claim of a payment's reference = %v, want ErrReferenceUsed", err)
		}
		m.OrderNo = p.OrderNo // the payment's own order may claim it
		if won, err := l.Payments().ClaimManual(t.Context(), m); err != nil || !won {
			t.Fatalf("the payment's own order = %v, %v", won, err)
		}
	})

	t.Run("of racing claims of one reference for different orders exactly one wins", func(t *testing.T) {
		l := newLedger(t)
		ref := fmt.Sprintf("pt-ref-%016x", rand.Uint64())
		const n = 16
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			won, used int
		)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := domain.ManualPayment{OrderNo: newOrderNo(), Provider: "pt-a", Reference: ref, Operator: "pt-op", At: usec()}
				ok, err := l.Payments().ClaimManual(t.Context(), m)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && ok:
					won++
				case errors.Is(err, domain.ErrReferenceUsed):
					used++
				default:
					t.Errorf("claim: %v, %v", ok, err)
				}
			}()
		}
		wg.Wait()
		if won != 1 || used != n-1 {
			t.Fatalf("won %d, used %d of %d", won, used, n)
		}
	})

	t.Run("a claim in a failed transaction is gone", func(t *testing.T) {
		l := newLedger(t)
		no := newOrderNo()
		m := domain.ManualPayment{OrderNo: no, Provider: "pt-a", Reference: fmt.Sprintf("pt-ref-%016x", rand.Uint64()),
			Operator: "pt-op", At: usec()}
		boom := errors.New("boom")
		err := l.Atomically(t.Context(), func(tx domain.Store) error {
			if _, err := tx.Payments().ClaimManual(t.Context(), m); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		m.OrderNo = newOrderNo()
		if won, err := l.Payments().ClaimManual(t.Context(), m); err != nil || !won {
			t.Fatalf("claim after the rollback = %v, %v", won, err)
		}
		if got, err := l.Payments().ManualOf(t.Context(), no); err != nil || len(got) != 0 {
			t.Fatalf("ManualOf(rolled back) = %+v, %v", got, err)
		}
	})
}

// runSupportSearch checks the order search's support filters: an order-number prefix, a
// guest's e-mail and a provider's reference (a payment's or a manual confirmation's), each
// alone and with the others; a malformed one is a ValidationError.
func runSupportSearch(t *testing.T, newLedger func(t *testing.T) domain.Ledger) {
	l := newLedger(t)
	p := createProduct(t, l)
	prefix := fmt.Sprintf("pt%012x", rand.Uint64()>>16)
	at := now()
	mk := func(suffix string, d time.Duration) domain.Order {
		o, err := domain.NewOrder(domain.OrderNo(prefix+suffix), newBuyer(), p, 1, newKey(), at.Add(d), 15*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a1, a2 := mk("-a1", 0), mk("-a2", time.Second)
	email := domain.Email(fmt.Sprintf("pt-%016x@example.com", rand.Uint64()))
	g := newGuestOrder(t, p, 1, email, at.Add(2*time.Second))
	g, err := domain.NewOrder(domain.OrderNo(prefix+"-b1"), g.Buyer(), p, 1, newKey(), at.Add(2*time.Second), 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	g, err = g.WithGuest(domain.Guest{Email: email, Lang: domain.LangChinese, AccessHash: domain.AccessHash{1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []domain.Order{a1, a2, g} {
		insertOrder(t, l, o)
	}
	payRef, manualRef := fmt.Sprintf("pt-pay-%016x", rand.Uint64()), fmt.Sprintf("pt-man-%016x", rand.Uint64())
	pay := newPayment(t, a2.No(), "pt-a", at)
	pay.ProviderRef = payRef
	createPayment(t, l, pay)
	if _, err := l.Payments().ClaimManual(t.Context(), domain.ManualPayment{OrderNo: g.No(), Provider: "pt-b",
		Reference: manualRef, Operator: "pt-op", At: at}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    domain.OrderFilter
		want []domain.Order
	}{
		{"a prefix of every one", domain.OrderFilter{NoPrefix: prefix}, []domain.Order{g, a2, a1}},
		{"a longer prefix", domain.OrderFilter{NoPrefix: prefix + "-a"}, []domain.Order{a2, a1}},
		{"a whole number", domain.OrderFilter{NoPrefix: string(a1.No())}, []domain.Order{a1}},
		{"the guest's e-mail", domain.OrderFilter{Email: email}, []domain.Order{g}},
		{"a payment's reference", domain.OrderFilter{ProviderRef: payRef}, []domain.Order{a2}},
		{"a manual confirmation's reference", domain.OrderFilter{ProviderRef: manualRef}, []domain.Order{g}},
		{"an unknown reference", domain.OrderFilter{ProviderRef: payRef + "x"}, nil},
		{"prefix and reference", domain.OrderFilter{NoPrefix: prefix + "-a", ProviderRef: manualRef}, nil},
		{"prefix and e-mail", domain.OrderFilter{NoPrefix: prefix, Email: email}, []domain.Order{g}},
	} {
		c.f.Limit = 10
		got, err := l.Orders().Search(t.Context(), c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d orders, want %d", c.name, len(got), len(c.want))
		}
		for i := range got {
			if got[i].No() != c.want[i].No() {
				t.Fatalf("%s: order %d is %s, want %s", c.name, i, got[i].No(), c.want[i].No())
			}
		}
	}
	for _, f := range []domain.OrderFilter{{NoPrefix: "a b"}, {NoPrefix: "50%"}, {Email: "not an address"},
		{ProviderRef: "two words"}} {
		f.Limit = 10
		if _, err := l.Orders().Search(t.Context(), f); !errors.Is(err, domain.ErrInvalidInput) {
			t.Fatalf("Search(%+v) = %v, want ErrInvalidInput", f, err)
		}
	}
}

// ourAdmins is ActiveAdmins narrowed to the case's operators (a shared database holds others).
func ourAdmins(t *testing.T, l domain.Store, prefix domain.OperatorName) []domain.OperatorName {
	t.Helper()
	all, err := l.Operators().ActiveAdmins(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.OperatorName
	for _, a := range all {
		if strings.HasPrefix(string(a), string(prefix)+"-") {
			out = append(out, a)
		}
	}
	return out
}
