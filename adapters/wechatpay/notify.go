package wechatpay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"cardshop/domain"
)

// The event types the gateway acts on.
const (
	EventTransactionSuccess = "TRANSACTION.SUCCESS"
	EventRefundSuccess      = "REFUND.SUCCESS"
	EventRefundAbnormal     = "REFUND.ABNORMAL"
	EventRefundClosed       = "REFUND.CLOSED"
)

// Algorithm is the one resource encryption accepted.
const Algorithm = "AEAD_AES_256_GCM"

// Notification is WeChat Pay's notification envelope.
type Notification struct {
	ID           string   `json:"id"`
	CreateTime   string   `json:"create_time"`
	EventType    string   `json:"event_type"`
	ResourceType string   `json:"resource_type"`
	Summary      string   `json:"summary"`
	Resource     Resource `json:"resource"`
}

// Resource is a notification's encrypted resource.
type Resource struct {
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	Nonce          string `json:"nonce"`
	AssociatedData string `json:"associated_data"`
	OriginalType   string `json:"original_type"`
}

// refundResource is a REFUND.* notification's decrypted resource. It carries no appid.
type refundResource struct {
	MchID         string `json:"mchid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	OutRefundNo   string `json:"out_refund_no"`
	RefundID      string `json:"refund_id"`
	RefundStatus  string `json:"refund_status"`
	Amount        Amount `json:"amount"`
}

// Verify checks a notification's signature (Wechatpay-Serial selects the platform certificate
// or the public key), its freshness against the arrival (|at − Wechatpay-Timestamp| < 5 min),
// decrypts its resource with the API v3 key and reads it:
//
//	TRANSACTION.SUCCESS → the transaction's trade_state (SUCCESS paid, CLOSED/REVOKED expired,
//	                      PAYERROR failed, others pending), amount.total in fen, transaction_id
//	REFUND.SUCCESS / REFUND.ABNORMAL / REFUND.CLOSED → a refund notice: RefundNo = out_refund_no,
//	                      RefundOutcome from refund_status, Amount = amount.refund
//	any other type      → pending with no order: accepted, acted on by nobody
//
// EventID is the notification's id. Errors: domain.ErrBadSignature for an unsigned, forged or
// stale notification and for a transaction of another mchid or appid (or a refund of another
// mchid); a domain.ValidationError for a well-signed one whose body or resource does not parse
// or does not decrypt.
func (g *Gateway) Verify(ctx context.Context, in domain.InboundRequest) (domain.ProviderNotice, error) {
	at := in.At
	if at.IsZero() {
		at = g.clock.Now()
	}
	if in.Method != "" && in.Method != http.MethodPost {
		return domain.ProviderNotice{}, fmt.Errorf("wechatpay notification: %w: method %s", domain.ErrBadSignature, in.Method)
	}
	if err := g.checkSignature(ctx, in.Header, in.Body, at); err != nil {
		return domain.ProviderNotice{}, fmt.Errorf("wechatpay notification: %w", err)
	}
	return g.parseNotification(in.Body)
}

// parseNotification reads a verified notification.
func (g *Gateway) parseNotification(body []byte) (domain.ProviderNotice, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return domain.ProviderNotice{}, domain.Invalid("body", "not a WeChat Pay notification JSON object")
	}
	if n.ID == "" || len(n.ID) > 64 || n.EventType == "" || len(n.EventType) > 64 {
		return domain.ProviderNotice{}, domain.Invalid("body", "a notification needs an id and an event_type")
	}
	notice := domain.ProviderNotice{EventID: n.ID, Outcome: domain.OutcomePending}
	switch {
	case n.EventType == EventTransactionSuccess:
		plain, err := g.open(n.Resource, "transaction")
		if err != nil {
			return domain.ProviderNotice{}, err
		}
		return g.transactionNotice(notice, plain)
	case strings.HasPrefix(n.EventType, "REFUND."):
		plain, err := g.open(n.Resource, "refund")
		if err != nil {
			return domain.ProviderNotice{}, err
		}
		return g.refundNotice(notice, n.EventType, plain)
	}
	notice.Reason = "event type " + n.EventType + " is not acted on"
	return notice, nil
}

// open decrypts a resource of the original type want.
func (g *Gateway) open(r Resource, want string) ([]byte, error) {
	if r.Algorithm != Algorithm {
		return nil, domain.Invalid("resource.algorithm", "not "+Algorithm)
	}
	if r.OriginalType != "" && r.OriginalType != want {
		return nil, domain.Invalid("resource.original_type", "not "+want)
	}
	plain, err := Decrypt(g.v3key.Reveal(), r.Nonce, r.AssociatedData, r.Ciphertext)
	if err != nil {
		return nil, domain.Invalid("resource", err.Error())
	}
	return plain, nil
}

func (g *Gateway) transactionNotice(n domain.ProviderNotice, plain []byte) (domain.ProviderNotice, error) {
	var t Transaction
	if err := json.Unmarshal(plain, &t); err != nil {
		return domain.ProviderNotice{}, domain.Invalid("resource", "not a transaction JSON object")
	}
	amount, cur, err := g.checkTransaction(t, "")
	if err != nil {
		return domain.ProviderNotice{}, fmt.Errorf("wechatpay notification: %w", err)
	}
	no, err := domain.ParseOrderNo(t.OutTradeNo)
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("out_trade_no", "not an order number")
	}
	n.OrderNo, n.ProviderRef, n.Amount, n.Currency = no, t.TransactionID, amount, cur
	n.Outcome = outcome(t.TradeState)
	switch n.Outcome {
	case domain.OutcomePaid:
		if t.TransactionID == "" {
			return domain.ProviderNotice{}, domain.Invalid("transaction_id", "a paid transaction without one")
		}
	case domain.OutcomeFailed, domain.OutcomePending:
		n.Reason = clip(t.TradeState+" "+t.TradeStateMsg, 200)
	default: // nothing more to check
	}
	return n, nil
}

func (g *Gateway) refundNotice(n domain.ProviderNotice, event string, plain []byte) (domain.ProviderNotice, error) {
	var r refundResource
	if err := json.Unmarshal(plain, &r); err != nil {
		return domain.ProviderNotice{}, domain.Invalid("resource", "not a refund JSON object")
	}
	if r.MchID != g.mchid {
		return domain.ProviderNotice{}, fmt.Errorf("wechatpay notification: %w: a refund of mchid %q", domain.ErrBadSignature, r.MchID)
	}
	no, err := domain.ParseOrderNo(r.OutTradeNo)
	if err != nil {
		return domain.ProviderNotice{}, domain.Invalid("out_trade_no", "not an order number")
	}
	if r.OutRefundNo == "" || len(r.OutRefundNo) > 64 || len(r.RefundID) > 64 || len(r.TransactionID) > 64 {
		return domain.ProviderNotice{}, domain.Invalid("out_refund_no", "missing or malformed")
	}
	oc, ok := refundOutcome(r.RefundStatus)
	if !ok || oc == domain.RefundPending || "REFUND."+r.RefundStatus != event {
		return domain.ProviderNotice{}, domain.Invalid("refund_status", "unknown, not final, or not the event's")
	}
	if r.Amount.Refund == nil || *r.Amount.Refund <= 0 {
		return domain.ProviderNotice{}, domain.Invalid("amount.refund", "missing or not positive")
	}
	n.OrderNo, n.ProviderRef, n.RefundNo, n.RefundOutcome = no, r.TransactionID, r.OutRefundNo, oc
	n.Amount, n.Currency = domain.Money(*r.Amount.Refund), cny
	if oc == domain.RefundRefused {
		n.Reason = "refund " + r.RefundStatus
	}
	return n, nil
}

// Reply is 204 without a body for an accepted notification; 400 with
// {"code":"FAIL","message":…} for a refused one, which WeChat Pay sends again.
func (g *Gateway) Reply(accepted bool) (status int, contentType string, body []byte) {
	if accepted {
		return http.StatusNoContent, "", nil
	}
	return http.StatusBadRequest, "application/json", []byte(`{"code":"FAIL","message":"refused"}`)
}
