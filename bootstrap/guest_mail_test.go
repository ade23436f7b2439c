package bootstrap_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/adapters/porttest"
	"cardshop/application"
	"cardshop/bootstrap"
	"cardshop/domain"
)

// mailbox is a test double of the SMTP mailer the service takes (an optional domain.Mailer):
// it keeps every mail by order.
type mailbox struct {
	mu    sync.Mutex
	mails map[domain.OrderNo][]domain.OrderMail
}

func (m *mailbox) SendOrderMail(_ context.Context, mail domain.OrderMail) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mails[mail.OrderNo] = append(m.mails[mail.OrderNo], mail)
	return nil
}

func (m *mailbox) of(no domain.OrderNo) []domain.OrderMail {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mails[no])
}

// total counts the mails sent to the orders (a database of earlier runs may hold others).
func (m *mailbox) total(orders []application.GuestPlaced) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, g := range orders {
		n += len(m.mails[g.Order.No()])
	}
	return n
}

func TestGuestOrdersMailedOnMemory(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	sellToGuests(t, cfg)
}

func TestGuestOrdersMailedOnRealAdapters(t *testing.T) {
	cfg, _, _ := realConfigIn(t, time.Minute, "cardshop_test_guest_mail")
	sellToGuests(t, cfg)
}

// sellToGuests runs the service of cfg with a mailbox as its mailer: guests order from many
// goroutines (one address over the per-buyer limit), the paid orders' e-mails go out through
// the mail relay, each exactly once with exactly its codes and a link that opens its order,
// and no unpaid order gets one.
func sellToGuests(t *testing.T, cfg bootstrap.Config) {
	cfg.RelayInterval = 100 * time.Millisecond
	box := &mailbox{mails: map[domain.OrderNo][]domain.OrderMail{}}
	var app struct {
		fx.In
		Sales     *application.Sales
		Payments  *application.Payments
		Catalogue *application.Catalogue
	}
	c := runService(t, cfg, io.Discard, fx.Supply(fx.Annotate(box, fx.As(new(domain.Mailer)))), fx.Populate(&app))
	ctx := context.Background()
	p, err := app.Catalogue.CreateProduct(ctx, application.NewProduct{ID: porttest.NewProductID(), Name: "游戏点卡 100", Price: 10000,
		MaxPerOrder: 5, Sale: domain.SaleRules{BuyerLimit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	codes := make([]string, 60)
	for i := range codes {
		codes[i] = fmt.Sprintf("GM-%d-%04d", p.ID(), i)
	}
	if _, err := app.Catalogue.ImportCodes(ctx, p.ID(), strings.NewReader(strings.Join(codes, "\n"))); err != nil {
		t.Fatal(err)
	}
	run := time.Now().UnixNano()
	var (
		mu      sync.Mutex
		placed  []application.GuestPlaced
		limited int
		wg      sync.WaitGroup
	)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			email := fmt.Sprintf("buyer%d.%d@example.com", i, run)
			if i%6 == 0 {
				email = fmt.Sprintf(" Greedy.%d@EXAMPLE.com", run) // 4 orders of one address, limit 3
			}
			g, err := app.Sales.PlaceGuestOrder(ctx, application.GuestOrder{Product: p.ID(), Qty: 1, Email: email, Lang: "zh-CN",
				IdempotencyKey: fmt.Sprintf("gm-%d-%02d", run, i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				placed = append(placed, g)
			case errors.Is(err, domain.ErrBuyerHoldingLimit):
				limited++
			default:
				t.Errorf("place guest order %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if limited != 1 || len(placed) != 23 {
		t.Fatalf("%d placed, %d over the per-address limit; want 23 and 1", len(placed), limited)
	}
	var paid, unpaid []application.GuestPlaced
	for i, g := range placed {
		if i%4 == 3 {
			unpaid = append(unpaid, g)
			continue
		}
		o := g.Order
		if _, err := app.Payments.ApplyPayment(ctx, domain.PaymentNotice{OrderNo: o.No(), Paid: true, Amount: o.Amount(),
			PaymentRef: "pay-" + string(o.No())}); err != nil {
			t.Fatalf("pay %s: %v", o.No(), err)
		}
		paid = append(paid, g)
	}
	deadline := time.Now().Add(15 * time.Second)
	for box.total(paid) < len(paid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * cfg.RelayInterval) // a second mail for an order would have come by now
	for _, g := range paid {
		mails := box.of(g.Order.No())
		if len(mails) != 1 {
			t.Fatalf("order %s got %d mails, want 1", g.Order.No(), len(mails))
		}
		m := mails[0]
		u, err := url.Parse(m.OrderURL)
		if err != nil || u.Path != "/orders/"+string(g.Order.No()) || u.Query().Get("key") != g.Secret {
			t.Fatalf("order %s: link %q does not open the order with its secret", g.Order.No(), m.OrderURL)
		}
		if m.To != string(g.Order.Email()) || m.Lang != "zh-CN" || m.Product != p.Name() {
			t.Errorf("mail of %s: %+v", g.Order.No(), m)
		}
		v, err := app.Sales.GuestOrder(ctx, g.Order.No(), g.Secret)
		if err != nil {
			t.Fatalf("order page of %s: %v", g.Order.No(), err)
		}
		var own []string
		for _, card := range v.Cards {
			own = append(own, card.Code.Reveal())
		}
		if got := slices.Sorted(slices.Values(m.Codes)); !slices.Equal(got, slices.Sorted(slices.Values(own))) || len(got) != 1 {
			t.Errorf("order %s mailed %v, its codes are %v", g.Order.No(), got, own)
		}
		if !v.Order.Revealed() {
			t.Errorf("order %s: the mailed codes were not recorded as revealed", g.Order.No())
		}
	}
	first := paid[0]
	if o, err := app.Sales.LookupGuestOrder(ctx, first.Order.No(), strings.ToUpper(string(first.Order.Email())), first.Secret); err == nil {
		t.Errorf("the lookup matched an address whose local part differs in case: %s", o.No())
	}
	if o, err := app.Sales.LookupGuestOrder(ctx, first.Order.No(), " "+string(first.Order.Email()), first.Secret); err != nil || o.No() != first.Order.No() {
		t.Errorf("lookup with the order's number, address and secret: %v", err)
	}
	for _, secret := range []string{paid[1].Secret, "", first.Secret + "x"} {
		if _, err := app.Sales.LookupGuestOrder(ctx, first.Order.No(), string(first.Order.Email()), secret); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("lookup with a wrong secret: %v", err)
		}
	}
	for _, g := range unpaid {
		if n := len(box.of(g.Order.No())); n != 0 {
			t.Errorf("unpaid order %s got %d mails", g.Order.No(), n)
		}
	}
	if n := box.total(placed); n != len(paid) {
		t.Errorf("%d mails for %d paid orders", n, len(paid))
	}
	if status, body := c.do("GET", "/metrics", "", ""); status != 200 || !strings.Contains(string(body), "cardshop_mail_backlog 0\n") {
		t.Errorf("/metrics (%d) shows no empty mail backlog", status)
	}
}
