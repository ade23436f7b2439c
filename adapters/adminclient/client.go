package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"cardshop/adapters/paysig"
)

// maxAnswer bounds how much of an answer is read: every answer of the API is far smaller.
const maxAnswer = 1 << 20

// Client calls one cardshop service. Its zero value is not usable: build it with New.
type Client struct {
	base       string // without a trailing slash
	adminToken string
}

// New returns a client of the service at baseURL (such as http://127.0.0.1:8080) that sends
// adminToken to the admin endpoints; the payment callback needs no token.
func New(baseURL, adminToken string) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), adminToken: adminToken}
}

// ServiceError is an answer other than the call's success (200 OK; 201 for a product created):
// its status and body (the service's JSON error).
type ServiceError struct {
	Status int
	Answer []byte
	// Code and Message are the JSON error's "code" and "message" (such as "invalid_request" and
	// "ends_at: must be after starts_at"); empty when the answer is not the service's JSON error
	// (a proxy's page, say).
	Code, Message string
	// Import is what an import of codes stopped half-way did before the error (the answer's
	// "import"); nil otherwise.
	Import *ImportReport
}

// Error gives the status and the service's JSON error.
func (e *ServiceError) Error() string {
	return fmt.Sprintf("the service answered %d: %s", e.Status, bytes.TrimSpace(e.Answer))
}

// newServiceError reads the code and message of the service's JSON error in answer, if it is one.
func newServiceError(status int, answer []byte) *ServiceError {
	e := &ServiceError{Status: status, Answer: answer}
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(answer, &body) == nil {
		e.Code, e.Message = body.Code, body.Message
	}
	return e
}

// adminCall sends a bodiless admin request and returns the answer of a 200, or a
// *ServiceError carrying the service's JSON error.
func (c *Client) adminCall(ctx context.Context, client *http.Client, method, url string) ([]byte, error) {
	return c.adminJSON(ctx, client, method, url, nil, http.StatusOK)
}

// adminJSON sends an admin request with body as its JSON body (none when nil) and returns the
// answer when its status is ok, or a *ServiceError carrying the service's JSON error.
func (c *Client) adminJSON(ctx context.Context, client *http.Client, method, url string, body []byte, ok int) ([]byte, error) {
	var in io.Reader
	if body != nil {
		in = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, in)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != ok {
		return nil, newServiceError(resp.StatusCode, answer)
	}
	return answer, nil
}

// callTimeout bounds one call of Pay and OrderAmount.
const callTimeout = 10 * time.Second

// OrderAmount reads an order's amount in minor units (GET /admin/orders/{no}?codes=false).
func (c *Client) OrderAmount(ctx context.Context, order string) (int64, error) {
	// codes=false: only the amount is needed, and a read with codes would count as a reveal
	// (a later refund would void the codes of a paid order).
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/admin/orders/"+order+"?codes=false", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	resp, err := (&http.Client{Timeout: callTimeout}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading order %s answered %d", order, resp.StatusCode)
	}
	var o struct {
		Amount int64 `json:"amount"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return 0, fmt.Errorf("reading order %s: %w", order, err)
	}
	return o.Amount, nil
}

// Pay sends the payment notice n to POST /api/payments/callback, signed by signer at now, and
// returns the service's status and answer, whatever the status.
func (c *Client) Pay(ctx context.Context, signer *paysig.Signer, n paysig.Notice, now time.Time) (int, []byte, error) {
	body, ts, sig, err := signer.SignedBody(n, now)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/payments/callback", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(paysig.HeaderTimestamp, ts)
	req.Header.Set(paysig.HeaderSignature, sig)
	resp, err := (&http.Client{Timeout: callTimeout}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, answer, nil
}

// Reconciliation is the service's reconciliation of one product (Reconciliation in
// openapi.json).
type Reconciliation struct {
	ProductID   int64 `json:"product_id"`
	Differences int   `json:"differences"`
	Repaired    bool  `json:"repaired"`
	// Gate is nil when the gate does not know the product.
	Gate *struct {
		Stock  int64 `json:"stock"`
		Sold   int64 `json:"sold"`
		Frozen bool  `json:"frozen"`
	} `json:"gate"`
	Cards  map[string]int64 `json:"cards"`
	Orders map[string]struct {
		Orders int64 `json:"orders"`
		Qty    int64 `json:"qty"`
	} `json:"orders"`
	Checks []struct {
		Name string `json:"name"`
		Want int64  `json:"want"`
		Got  int64  `json:"got"`
		OK   bool   `json:"ok"`
	} `json:"checks"`
}

// Reconcile reads a product's reconciliation (GET /admin/products/{id}/reconcile), or with
// repair has the service drain the outbox and rebuild the gate from the ledger first (POST
// ...?repair=true).
func (c *Client) Reconcile(ctx context.Context, product int64, repair bool) (Reconciliation, error) {
	method, url := http.MethodGet, fmt.Sprintf("%s/admin/products/%d/reconcile", c.base, product)
	if repair {
		method, url = http.MethodPost, url+"?repair=true"
	}
	answer, err := c.adminCall(ctx, &http.Client{Timeout: time.Minute}, method, url)
	if err != nil {
		return Reconciliation{}, err
	}
	var rep Reconciliation
	if err := json.Unmarshal(answer, &rep); err != nil {
		return Reconciliation{}, fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	return rep, nil
}

// RefundAnswer is the service's answer to a refund: the order's status, where its codes went,
// and where the return of its money stands at its provider.
type RefundAnswer struct {
	Accepted      bool   `json:"-"` // 202: the provider finishes the refund of the money later
	OrderNo       string `json:"order_no"`
	Status        string `json:"status"`
	CodesRecycled int    `json:"codes_recycled"`
	CodesVoided   int    `json:"codes_voided"`
	Money         *struct {
		Provider  string `json:"provider"`
		Status    string `json:"status"`
		RefundNo  string `json:"refund_no"`
		RefundRef string `json:"refund_ref"`
		Reason    string `json:"reason"`
		ByHand    bool   `json:"by_hand"`
	} `json:"money_refund"`
}

// Refund refunds an order (POST /admin/orders/{no}/refund): its money through its provider,
// then its codes. void and recycle choose what happens to the codes (neither: the service's
// default); reason is recorded.
func (c *Client) Refund(ctx context.Context, order string, void, recycle bool, reason string) (RefundAnswer, error) {
	body, err := json.Marshal(struct {
		Void    bool   `json:"void,omitempty"`
		Recycle bool   `json:"recycle,omitempty"`
		Reason  string `json:"reason,omitempty"`
	}{void, recycle, reason})
	if err != nil {
		return RefundAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/admin/orders/"+order+"/refund", bytes.NewReader(body))
	if err != nil {
		return RefundAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return RefundAnswer{}, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return RefundAnswer{}, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return RefundAnswer{}, newServiceError(resp.StatusCode, answer)
	}
	var out RefundAnswer
	if err := json.Unmarshal(answer, &out); err != nil {
		return RefundAnswer{}, fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	out.Accepted = resp.StatusCode == http.StatusAccepted
	return out, nil
}

// VoidAnswer is what POST /admin/products/{id}/codes/void did: counts, never a code.
type VoidAnswer struct {
	Voided      int    `json:"voided"`
	NotFound    int    `json:"not_found"`
	NotVoidable int    `json:"not_voidable"`
	Ref         string `json:"ref"`
}

// VoidCodes voids codes of a frozen product (POST /admin/products/{id}/codes/void): at most
// 10,000 per call; reason is required and recorded.
func (c *Client) VoidCodes(ctx context.Context, product int64, codes []string, reason string) (VoidAnswer, error) {
	body, err := json.Marshal(struct {
		Codes  []string `json:"codes"`
		Reason string   `json:"reason"`
	}{codes, reason})
	if err != nil {
		return VoidAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/admin/products/%d/codes/void", c.base, product),
		bytes.NewReader(body))
	if err != nil {
		return VoidAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return VoidAnswer{}, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return VoidAnswer{}, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return VoidAnswer{}, newServiceError(resp.StatusCode, answer)
	}
	var out VoidAnswer
	if err := json.Unmarshal(answer, &out); err != nil {
		return VoidAnswer{}, fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	return out, nil
}
