package adminclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// ManualPayment is the answer to a manual payment confirmation (ManualPaymentResult in
// openapi.json): the order's number and status after it, and what the provider's query said.
type ManualPayment struct {
	Order struct {
		OrderNo    string `json:"order_no"`
		Status     string `json:"status"`
		PaymentRef string `json:"payment_ref"`
	} `json:"order"`
	Provider   string `json:"provider"`
	Reference  string `json:"reference"`
	Queried    string `json:"queried"`
	Overridden bool   `json:"overridden"`
}

// ConfirmPayment marks an order paid by hand (POST /admin/orders/{no}/manual-payment;
// operator, an override admin): the provider is asked first; override is an admin's reason to
// pay the order although the provider does not confirm the payment ("" for none).
func (c *Client) ConfirmPayment(ctx context.Context, order, provider, reference, note, override string) (ManualPayment, error) {
	body, err := json.Marshal(struct {
		Provider  string `json:"provider"`
		Reference string `json:"reference"`
		Note      string `json:"note,omitempty"`
		Override  string `json:"override,omitempty"`
	}{provider, reference, note, override})
	if err != nil {
		return ManualPayment{}, err
	}
	var out ManualPayment
	err = c.operatorCall(ctx, http.MethodPost, c.base+"/admin/orders/"+url.PathEscape(order)+"/manual-payment", body, http.StatusOK, &out)
	return out, err
}

// DisableOperator disables an operator (POST /admin/operators/{name}/disable; admin): its token
// is refused until EnableOperator.
func (c *Client) DisableOperator(ctx context.Context, name string) (Operator, error) {
	var o Operator
	err := c.operatorCall(ctx, http.MethodPost, c.operatorURL(name)+"/disable", nil, http.StatusOK, &o)
	return o, err
}

// EnableOperator enables a disabled operator again (POST /admin/operators/{name}/enable; admin).
func (c *Client) EnableOperator(ctx context.Context, name string) (Operator, error) {
	var o Operator
	err := c.operatorCall(ctx, http.MethodPost, c.operatorURL(name)+"/enable", nil, http.StatusOK, &o)
	return o, err
}
