package application

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"cardshop/domain"
)

// NewPayment is a buyer's request to pay an order through a provider.
type NewPayment struct {
	Buyer    domain.BuyerID
	OrderNo  domain.OrderNo
	Provider domain.Provider
	ClientIP string
}

// Providers lists the payment providers offered to new orders, by name: those configured by
// the environment and the channels enabled in the console (see Channels).
func (s *Payments) Providers() []domain.Provider {
	return slices.Clone(s.gateways.Load().offered)
}

// CreatePayment creates the payment of a PENDING order at a provider, or returns the one
// already created there: an order has at most one payment per provider, and asking again (a
// double click, a retry after a lost answer) gives the same one. The order's amount in the
// shop's currency is what is charged. A payment that failed or expired at the provider while
// the order is still PENDING is created again in its place.
//
// created is false when an existing payment is returned. An open payment is returned only
// while the order is PENDING: one a provider could not close (epay has no close) stays OPEN
// after its order closed or was paid through another provider, and no buyer is sent to pay it.
//
// Errors: ErrProviderUnknown, ErrOrderNotFound (also another buyer's order),
// ErrOrderNotPayable (not PENDING, and not paid through this provider), ErrUnavailable (the provider or the ledger could not be
// reached: retry; a retry reaches the same payment at providers that take an idempotency key).
func (s *Payments) CreatePayment(ctx context.Context, cmd NewPayment) (p domain.Payment, created bool, err error) {
	gw, ok := s.gateways.Load().offer(cmd.Provider)
	if !ok {
		return domain.Payment{}, false, domain.ErrProviderUnknown
	}
	o, err := s.ledger.Orders().Order(ctx, cmd.OrderNo)
	if err != nil {
		return domain.Payment{}, false, fmt.Errorf("load order: %w", err)
	}
	if o.Buyer() != cmd.Buyer {
		return domain.Payment{}, false, domain.ErrOrderNotFound
	}
	existing, err := s.ledger.Payments().Payment(ctx, o.No(), gw.Provider())
	switch {
	case err == nil && existing.Status == domain.PaymentOpen && o.Status() == domain.StatusPending:
		return existing, false, nil
	case err == nil && existing.Status == domain.PaymentPaid:
		return existing, false, nil // the order is (being) paid: answer the payment, not an error
	case err != nil && !errors.Is(err, domain.ErrPaymentNotFound):
		return domain.Payment{}, false, fmt.Errorf("load payment: %w", err)
	}
	if o.Status() != domain.StatusPending {
		return domain.Payment{}, false, fmt.Errorf("%w: order is %s", domain.ErrOrderNotPayable, o.Status())
	}
	product, err := s.product(ctx, o.Product())
	if err != nil {
		return domain.Payment{}, false, err
	}
	req := domain.PaymentRequest{OrderNo: o.No(), Amount: o.Amount(), Currency: s.cfg.Currency,
		Subject:   fmt.Sprintf("%s × %d", product.Name(), o.Qty()),
		ExpiresAt: o.ExpiresAt(), ReturnURL: s.returnURL(o.No()), NotifyURL: s.notifyURL(gw.Provider()),
		ClientIP: cmd.ClientIP}
	made, err := gw.Create(ctx, req)
	if err != nil {
		return domain.Payment{}, false, fmt.Errorf("create payment at %s: %w", gw.Provider(), err)
	}
	now := s.clock.Now()
	p = domain.Payment{OrderNo: o.No(), Provider: gw.Provider(), ProviderRef: made.ProviderRef, Amount: o.Amount(),
		Currency: s.cfg.Currency, Status: domain.PaymentOpen, PayURL: made.PayURL, QRCode: made.QRCode,
		CreatedAt: now, UpdatedAt: now}
	if existing.Provider != "" { // a failed or expired payment of the order: replace it
		p.CreatedAt = existing.CreatedAt
		won, err := s.ledger.Payments().Transition(ctx, p, existing.Status)
		if err != nil {
			return domain.Payment{}, false, fmt.Errorf("store payment: %w", err)
		}
		if !won {
			return s.currentPayment(ctx, o.No(), gw.Provider())
		}
		return p, true, nil
	}
	if err := s.ledger.Payments().Create(ctx, p); err != nil {
		if errors.Is(err, domain.ErrPaymentExists) { // a concurrent request stored it first
			return s.currentPayment(ctx, o.No(), gw.Provider())
		}
		return domain.Payment{}, false, fmt.Errorf("store payment: %w", err)
	}
	return p, true, nil
}

func (s *core) currentPayment(ctx context.Context, no domain.OrderNo, provider domain.Provider) (domain.Payment, bool, error) {
	p, err := s.ledger.Payments().Payment(ctx, no, provider)
	if err != nil {
		return domain.Payment{}, false, fmt.Errorf("load payment: %w", err)
	}
	return p, false, nil
}

// notifyURL is where the provider sends its notifications.
func (s *core) notifyURL(p domain.Provider) string {
	return strings.ReplaceAll(s.cfg.NotifyURL, "{provider}", string(p))
}

func (s *core) returnURL(no domain.OrderNo) string {
	return strings.ReplaceAll(s.cfg.ReturnURL, "{order_no}", string(no))
}

// OrderPayments lists the order's payments (for its buyer's view and for operators).
func (s *Payments) OrderPayments(ctx context.Context, no domain.OrderNo) ([]domain.Payment, error) {
	ps, err := s.ledger.Payments().OfOrder(ctx, no)
	if err != nil {
		return nil, fmt.Errorf("load payments: %w", err)
	}
	return ps, nil
}

// Notifications lists the newest provider notifications q selects (of one order, verified or
// refused only; q.Limit bounded to 1..1000), as they were received and judged: what an
// operator reads when a buyer says "I paid". Refused ones are aggregates (see recordRefused).
func (s *Payments) Notifications(ctx context.Context, q domain.NotificationQuery) ([]domain.NotificationRecord, error) {
	q.Limit = min(max(q.Limit, 1), 1000)
	recs, err := s.ledger.Notifications().Recent(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("load notifications: %w", err)
	}
	return recs, nil
}

// ErrUnverified marks a notification refused before verification (it wraps the reason): it
// is counted and logged at a limited pace by HandleNotification, so callers need not log it.
var ErrUnverified = errors.New("notification not verified")

// errRefused marks a verified notification cardshop does not accept (it names an order
// without a payment at this provider, or another amount or currency).
var errRefused = errors.New("notification refused")

// HandleNotification verifies a provider's notification on its raw bytes and applies it:
//
//   - the notice must name an order that has a payment at this provider, for exactly the
//     payment's amount and currency (integer minor units); otherwise it is refused and an
//     operator alerted (a success of one channel never pays an order of another);
//   - paid: the order is paid through ApplyPayment (a PENDING order gets its codes; a CLOSED or
//     FAILED one takes the late-payment path), but for an order that is no longer PENDING the
//     provider is asked first where it supports a query, and a success it does not confirm is
//     refused (the provider resends; a final state is never overwritten on a notice alone); a
//     provider that is a domain.NoticeConfirmer (epay) confirms every success first, PENDING
//     order or not (see confirmNotice);
//   - failed: a PENDING order fails and its stock returns; expired: the payment is marked so;
//     pending: nothing to do;
//   - a duplicate, or a stale notice for an order that moved on, is accepted with no change.
//
// Every verified notification is recorded in the notification log with what was done; those
// refused before verification are counted there per provider, address and window
// (recordRefused), so that anyone's forgeries cannot grow the log without bound.
// A nil error means the notification is accepted (also a duplicate); any error is a refusal,
// and the provider resends. The driving adapter answers each in the provider's own words.
//
// Errors: ErrProviderUnknown; ErrUnverified wrapping the verification's error (ErrBadSignature,
// ErrInvalidInput, ErrUnavailable), already counted and logged at a limited pace; then
// errRefused-wrapped refusals (ErrAmountMismatch, ErrPaymentNotFound), ErrInvalidInput,
// ErrUnavailable (the provider resends later).
func (s *Payments) HandleNotification(ctx context.Context, provider domain.Provider, in domain.InboundRequest, remote string) error {
	gw, ok := s.gateway(provider)
	if !ok {
		return domain.ErrProviderUnknown
	}
	if in.At.IsZero() {
		in.At = s.clock.Now()
	}
	rec := domain.NotificationRecord{Provider: provider, At: in.At, Method: in.Method, Remote: remote, BodyBytes: len(in.Body)}
	n, err := gw.Verify(ctx, in)
	if err != nil {
		rec.Result = "refused: " + refusal(err)
		s.recordRefused(ctx, rec, err)
		return fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	rec.Verified, rec.Count = true, 1
	rec.OrderNo, rec.EventID, rec.ProviderRef, rec.Outcome = n.OrderNo, n.EventID, n.ProviderRef, n.Outcome.String()
	rec.Amount, rec.Currency = n.Amount, n.Currency.Code
	result, err := s.applyNotice(ctx, gw, n)
	if err != nil {
		rec.Result = "refused: " + refusal(err)
		if errors.Is(err, domain.ErrUnavailable) {
			rec.Result = "not applied yet: " + refusal(err)
		}
		s.record(ctx, rec)
		return err
	}
	rec.Accepted, rec.Result = true, result
	s.record(ctx, rec)
	return nil
}

// refusal is an error's reason for the notification log: the sentinel's words, never a secret.
func refusal(err error) string {
	for _, e := range []error{domain.ErrBadSignature, domain.ErrAmountMismatch, domain.ErrPaymentNotFound,
		domain.ErrOrderNotFound, domain.ErrUnavailable, domain.ErrInvalidInput} {
		if errors.Is(err, e) {
			var ve *domain.ValidationError
			if errors.As(err, &ve) {
				return ve.Error()
			}
			return e.Error()
		}
	}
	return "not accepted"
}

func (s *core) record(ctx context.Context, rec domain.NotificationRecord) {
	ctx, cancel := detached(ctx)
	defer cancel()
	if err := s.ledger.Notifications().Record(ctx, rec); err != nil {
		s.log.ErrorContext(ctx, "payment notification not logged", "provider", rec.Provider, "order_no", rec.OrderNo, "err", err)
	}
}

// applyNotice applies a verified notice and says what it did.
func (s *core) applyNotice(ctx context.Context, gw domain.PaymentGateway, n domain.ProviderNotice) (string, error) {
	if n.RefundNo != "" {
		return s.applyRefundNotice(ctx, gw, n)
	}
	if n.OrderNo == "" && n.Outcome == domain.OutcomePending {
		// An event about nothing cardshop sells (a provider sends every event type of the
		// account to one endpoint): accepted, or the provider would resend it for days.
		return "ignored: not about an order's payment", nil
	}
	p, err := s.ledger.Payments().Payment(ctx, n.OrderNo, gw.Provider())
	if errors.Is(err, domain.ErrPaymentNotFound) {
		if n.Outcome == domain.OutcomePaid {
			s.alerts.Alert(ctx, domain.Alert{Kind: "foreign_payment", OrderNo: n.OrderNo,
				Message: fmt.Sprintf("%s reports a payment for an order that has no payment there; refused", gw.Provider())})
		}
		return "", fmt.Errorf("%w: order %s has no payment at %s: %w", errRefused, n.OrderNo, gw.Provider(), err)
	}
	if err != nil {
		return "", fmt.Errorf("load payment: %w", err)
	}
	carriesAmount := !n.Currency.IsZero()
	if (n.Outcome == domain.OutcomePaid || carriesAmount) && (n.Amount != p.Amount || n.Currency != p.Currency) {
		s.alerts.Alert(ctx, domain.Alert{Kind: "amount_mismatch", OrderNo: n.OrderNo,
			Message: fmt.Sprintf("%s reports %s %s for a payment of %s %s; refused", gw.Provider(),
				n.Currency.Format(n.Amount), n.Currency, p.Currency.Format(p.Amount), p.Currency)})
		return "", fmt.Errorf("%w: %w", errRefused, domain.ErrAmountMismatch)
	}
	if n.ProviderRef != "" && p.ProviderRef == "" {
		p.ProviderRef = n.ProviderRef
	}
	switch n.Outcome {
	case domain.OutcomePaid:
		return s.noticePaid(ctx, gw, p, n)
	case domain.OutcomeFailed:
		a, err := s.applyPayment(ctx, domain.PaymentNotice{OrderNo: n.OrderNo, Paid: false, PaymentRef: paymentRef(p), Reason: n.Reason})
		if err != nil {
			return "", err
		}
		s.movePayment(ctx, p, domain.PaymentFailed, domain.PaymentOpen)
		if a.changed {
			return "failed: order FAILED, stock returned", nil
		}
		return "failed: stale, order is " + a.order.Status().String(), nil
	case domain.OutcomeExpired:
		s.movePayment(ctx, p, domain.PaymentExpired, domain.PaymentOpen)
		return "expired", nil
	default:
		return "pending: nothing to do", nil
	}
}

// noticePaid pays the order of a verified success.
func (s *core) noticePaid(ctx context.Context, gw domain.PaymentGateway, p domain.Payment, n domain.ProviderNotice) (string, error) {
	o, err := s.ledger.Orders().Order(ctx, n.OrderNo)
	if err != nil {
		return "", fmt.Errorf("load order: %w", err)
	}
	ref := paymentRef(p)
	if o.Status() == domain.StatusPaid && o.PaymentRef() == ref {
		s.movePayment(ctx, p, domain.PaymentPaid, domain.PaymentOpen, domain.PaymentExpired, domain.PaymentFailed)
		return "duplicate: order already PAID", nil
	}
	if c, ok := gw.(domain.NoticeConfirmer); ok {
		// A provider whose signature proves little: every success is confirmed first.
		if err := s.confirmNotice(ctx, c, gw.Provider(), p, n); err != nil {
			return "", err
		}
	} else if o.Status() != domain.StatusPending {
		// A success for an order that moved on: believe the provider's own answer, where it
		// has one, rather than the notice alone.
		st, err := gw.Query(ctx, p)
		switch {
		case errors.Is(err, domain.ErrUnsupported):
		case err != nil:
			return "", fmt.Errorf("confirm the payment at %s: %w", gw.Provider(), err)
		case st.Outcome != domain.OutcomePaid:
			return "", fmt.Errorf("%w: %s does not confirm the payment (it says %s)", errRefused, gw.Provider(), st.Outcome)
		}
	}
	a, err := s.applyPayment(ctx, domain.PaymentNotice{OrderNo: n.OrderNo, Paid: true, Amount: n.Amount, PaymentRef: ref})
	if err != nil {
		return "", err
	}
	s.movePayment(ctx, p, domain.PaymentPaid, domain.PaymentOpen, domain.PaymentExpired, domain.PaymentFailed)
	if a.changed {
		s.closeOtherPayments(ctx, o.No(), gw.Provider())
	}
	switch st := a.order.Status(); {
	case !a.changed && st == domain.StatusPaid && a.order.PaymentRef() == ref:
		return "duplicate: order already PAID", nil
	case !a.changed:
		return "not applied: order is " + st.String(), nil
	case st == domain.StatusPaid && o.Status() == domain.StatusPending:
		return "paid", nil
	case st == domain.StatusPaid:
		return "paid late (order was " + o.Status().String() + ")", nil
	default:
		return "accepted: order is " + st.String(), nil
	}
}

// confirmNotice has a NoticeConfirmer confirm a verified success before it pays: only the
// provider's record saying paid, for the payment's amount and currency, lets it through. A
// provider that cannot be asked refuses the notice with ErrUnavailable (the provider resends;
// the order's close at its expiry asks again, and after the close grace a resend takes the late
// path, confirmed the same way). A record that says refunded or frozen raises an alert.
func (s *core) confirmNotice(ctx context.Context, c domain.NoticeConfirmer, provider domain.Provider, p domain.Payment, n domain.ProviderNotice) error {
	st, err := c.ConfirmPaid(ctx, p, n)
	switch {
	case errors.Is(err, domain.ErrUnavailable):
		return fmt.Errorf("confirm the payment at %s: %w", provider, err)
	case err != nil:
		return fmt.Errorf("%w: %s does not confirm the payment: %w", errRefused, provider, err)
	case st.Outcome == domain.OutcomeRefunded || st.Outcome == domain.OutcomeFrozen:
		s.alertReversed(ctx, p, st.Outcome, "a success notification for it is refused")
		return fmt.Errorf("%w: %s has the payment %s", errRefused, provider, st.Outcome)
	case st.Outcome != domain.OutcomePaid:
		return fmt.Errorf("%w: %s does not confirm the payment (it says %s)", errRefused, provider, st.Outcome)
	case st.Amount != p.Amount || st.Currency != p.Currency:
		return fmt.Errorf("%w: %s confirms another amount: %w", errRefused, provider, domain.ErrAmountMismatch)
	}
	return nil
}

// alertReversed raises the alert of a payment its provider has as paid and then refunded
// (payment_refunded_at_provider) or frozen (payment_frozen_at_provider): the order is never
// paid on it; an operator checks the provider's console.
func (s *core) alertReversed(ctx context.Context, p domain.Payment, outcome domain.PaymentOutcome, what string) {
	kind := "payment_refunded_at_provider"
	if outcome == domain.OutcomeFrozen {
		kind = "payment_frozen_at_provider"
	}
	s.alerts.Alert(ctx, domain.Alert{Kind: kind, OrderNo: p.OrderNo,
		Message: fmt.Sprintf("%s has the order's payment %s: it is not paid; %s", p.Provider, outcome, what)})
}

// closeOtherPayments closes, at their providers, the order's payments still open elsewhere once
// one provider paid it, so the buyer cannot pay twice through another channel; best effort (a
// second payment that still arrives raises second_payment for a refund by hand).
func (s *core) closeOtherPayments(ctx context.Context, no domain.OrderNo, paidAt domain.Provider) {
	ps, err := s.ledger.Payments().OfOrder(ctx, no)
	if err != nil {
		s.log.WarnContext(ctx, "other open payments not closed", "order_no", no, "err", err)
		return
	}
	for _, p := range ps {
		gw, ok := s.gateway(p.Provider)
		if p.Provider == paidAt || p.Status != domain.PaymentOpen || !ok {
			continue
		}
		switch err := gw.Close(ctx, p); {
		case err == nil:
			s.movePayment(ctx, p, domain.PaymentExpired, domain.PaymentOpen)
		case !errors.Is(err, domain.ErrUnsupported):
			s.log.WarnContext(ctx, "an open payment at another provider could not be closed", "order_no", no,
				"provider", p.Provider, "err", err)
		}
	}
}

// paymentRef is the reference the order records for a payment: provider and provider ref, so
// two channels can never look like one payment.
func paymentRef(p domain.Payment) string {
	if p.ProviderRef == "" {
		return string(p.Provider) + ":" + string(p.OrderNo)
	}
	return string(p.Provider) + ":" + p.ProviderRef
}

// movePayment records a payment's new status when it is still in one of from; best effort
// (the order's state is the truth, the payment's is what the provider last said).
func (s *core) movePayment(ctx context.Context, p domain.Payment, to domain.PaymentStatus, from ...domain.PaymentStatus) {
	cur, err := s.ledger.Payments().Payment(ctx, p.OrderNo, p.Provider)
	if err != nil {
		s.log.WarnContext(ctx, "payment status not recorded", "order_no", p.OrderNo, "provider", p.Provider, "err", err)
		return
	}
	ok := false
	for _, f := range from {
		ok = ok || cur.Status == f
	}
	if !ok || cur.Status == to {
		return
	}
	next := cur
	next.Status, next.UpdatedAt = to, s.clock.Now()
	if next.ProviderRef == "" {
		next.ProviderRef = p.ProviderRef
	}
	if _, err := s.ledger.Payments().Transition(ctx, next, cur.Status); err != nil {
		s.log.WarnContext(ctx, "payment status not recorded", "order_no", p.OrderNo, "provider", p.Provider, "err", err)
	}
}

// errPaymentOpen tells CloseExpired that a provider could not close (nor report) the order's
// open payment yet: the close waits and is retried.
var errPaymentOpen = fmt.Errorf("an open payment could not be closed at its provider yet: %w", domain.ErrUnavailable)

// settlePayments closes, at their providers, the open payments of an order about to close.
// It reports paid=true when a provider says the order was paid: the caller pays the order
// instead of closing it. A payment the provider has as refunded or frozen never pays: the
// order closes with an alert. A provider that cannot be reached keeps the close waiting (errPaymentOpen)
// until Config.PaymentCloseGrace past the expiry; then the order closes with an alert, and a
// payment that still arrives takes the late-payment path.
func (s *core) settlePayments(ctx context.Context, o domain.Order) (paid bool, err error) {
	ps, err := s.ledger.Payments().OfOrder(ctx, o.No())
	if err != nil {
		return false, fmt.Errorf("load payments: %w", err)
	}
	for _, p := range ps {
		if p.Status != domain.PaymentOpen {
			continue
		}
		gw, ok := s.gateway(p.Provider)
		if !ok {
			s.log.WarnContext(ctx, "open payment of a provider no longer enabled left as it is", "order_no", o.No(), "provider", p.Provider)
			continue
		}
		closeErr := gw.Close(ctx, p)
		if closeErr == nil {
			s.movePayment(ctx, p, domain.PaymentExpired, domain.PaymentOpen)
			continue
		}
		if !errors.Is(closeErr, domain.ErrAlreadyPaid) && !errors.Is(closeErr, domain.ErrUnsupported) && !errors.Is(closeErr, domain.ErrUnavailable) {
			s.log.WarnContext(ctx, "payment close refused by the provider; querying it", "order_no", o.No(), "provider", p.Provider, "err", closeErr)
		}
		st, queryErr := gw.Query(ctx, p)
		switch {
		case queryErr == nil && st.Outcome == domain.OutcomePaid:
			if st.Currency != p.Currency || st.Amount != p.Amount {
				s.alerts.Alert(ctx, domain.Alert{Kind: "amount_mismatch", OrderNo: o.No(),
					Message: fmt.Sprintf("%s reports the payment paid with %s %s instead of %s %s; the order closes", p.Provider,
						st.Currency.Format(st.Amount), st.Currency, p.Currency.Format(p.Amount), p.Currency)})
				continue
			}
			if st.ProviderRef != "" && p.ProviderRef == "" {
				p.ProviderRef = st.ProviderRef
			}
			if _, err := s.applyPayment(ctx, domain.PaymentNotice{OrderNo: o.No(), Paid: true, Amount: st.Amount, PaymentRef: paymentRef(p)}); err != nil {
				return false, err
			}
			s.movePayment(ctx, p, domain.PaymentPaid, domain.PaymentOpen)
			return true, nil
		case queryErr == nil && (st.Outcome == domain.OutcomeExpired || st.Outcome == domain.OutcomeFailed):
			s.movePayment(ctx, p, domain.PaymentExpired, domain.PaymentOpen)
		case queryErr == nil && st.Outcome == domain.OutcomeRefunded:
			// Paid, then refunded at the provider (its notification lost): never paid here.
			s.alertReversed(ctx, p, st.Outcome, "the order closes")
			s.movePayment(ctx, p, domain.PaymentRefunded, domain.PaymentOpen)
		case queryErr == nil && st.Outcome == domain.OutcomeFrozen:
			// Held by the provider: the order closes; released and notified later, the success
			// takes the confirmed late path.
			s.alertReversed(ctx, p, st.Outcome, "the order closes")
		case errors.Is(queryErr, domain.ErrUnavailable):
			return s.waitForProvider(ctx, o, p, queryErr)
		case queryErr == nil || errors.Is(queryErr, domain.ErrUnsupported):
			if errors.Is(closeErr, domain.ErrUnavailable) {
				return s.waitForProvider(ctx, o, p, closeErr)
			}
			// Nothing closes it there: a payment made after the close takes the late path.
		default:
			// The provider answered without knowing the payment as paid (an epay gateway that
			// never saw the order answers an error): it is not paid, the order closes.
			s.log.WarnContext(ctx, "payment provider does not report the payment; the order closes", "order_no", o.No(),
				"provider", p.Provider, "err", queryErr)
		}
	}
	return false, nil
}

// waitForProvider keeps an order's close waiting for its provider, up to the grace.
func (s *core) waitForProvider(ctx context.Context, o domain.Order, p domain.Payment, cause error) (bool, error) {
	if s.clock.Now().Before(o.ExpiresAt().Add(s.cfg.PaymentCloseGrace)) {
		s.log.WarnContext(ctx, "order close waits for its payment provider", "order_no", o.No(), "provider", p.Provider, "err", cause)
		return false, errPaymentOpen
	}
	s.alerts.Alert(ctx, domain.Alert{Kind: "payment_close_failed", OrderNo: o.No(), Product: o.Product(),
		Message: fmt.Sprintf("%s could not close or report the order's payment for %s past its expiry; the order closes, and a payment that still arrives takes the late-payment path",
			p.Provider, s.cfg.PaymentCloseGrace)})
	return false, nil
}
