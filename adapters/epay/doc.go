// Package epay is the 易支付 (epay v1, the "彩虹易支付" family of gateways) payment provider as a
// domain.PaymentGateway.
//
// The protocol, as the gateways publish it:
//   - Signature: every parameter but sign, sign_type and empty values, sorted by ASCII key,
//     joined "k=v&…" with the raw (unescaped) values, the merchant KEY appended (directly, or
//     as "&key=KEY" on gateways that want it), MD5, lower-case hex; sign_type=MD5.
//   - Create: the buyer is redirected to {gateway}/submit.php with the signed parameters (pid,
//     type, out_trade_no, notify_url, return_url, name, money), or the shop POSTs the same form
//     (plus clientip) to {gateway}/mapi.php and gets JSON {code:1, trade_no, payurl|qrcode|
//     urlscheme}.
//   - Notify: the gateway calls notify_url, usually by GET, with pid, trade_no, out_trade_no,
//     type, name, money, trade_status and the signature, and resends until the answer's body
//     is the plain text "success".
//   - Query: GET {gateway}/api.php?act=order&pid=…&key=…&out_trade_no=… answers JSON with
//     status 0 unpaid, 1 paid, 2 refunded, 3 frozen. The KEY travels in that URL: it is never
//     logged, and errors never carry it. Only 1 is paid: 2 is domain.OutcomeRefunded and 3
//     domain.OutcomeFrozen, which never pay an order.
//
// One signature, one parameter set. The signed string joins raw values with '&' and '=', so a
// value holding either would let one signature cover two parameter sets: a product named
// "x&out_trade_no=<another order>&trade_status=TRADE_SUCCESS&…&z=" would turn its pay URL's
// signature into a paid notification for another order of the same amount. So Create signs no
// value with '&', '=', a control character or invalid UTF-8 (the subject goes through
// SafeName, which writes the full-width look-alikes '＆' and '＝'; a client IP that is not an
// address is left out; anything else, such as a return URL with a query, is a
// ValidationError), and Verify refuses, as domain.ErrBadSignature, a notification with such a
// value or with a parameter name other than 1 to 64 of A-Z a-z 0-9 _.
//
// Confirmed by query. MD5 over the KEY is weak by design, so the gateway is a
// domain.NoticeConfirmer: the application pays on a TRADE_SUCCESS only once ConfirmPaid has
// matched it with the payment (order, money, trade_no, the type it was created with) and the
// gateway's own record (api.php?act=order: status 1, the same trade_no, money, type and pid).
// When the gateway cannot be asked the notification is refused with domain.ErrUnavailable and
// the gateway resends.
//   - Refund (when the gateway's operator enabled it for the merchant): POST
//     {gateway}/api.php?act=refund with pid, key, trade_no or out_trade_no, money (yuan) →
//     JSON {code, msg}. Gateways built on 彩虹易支付 answer code 1 on success; its upstream
//     source answers code 0 with "退款成功…"; anything else is a refusal (code -1 with the
//     channel's words, -2 refund API not enabled, -3 bad pid or key). The gateway refunds only
//     a paid order (status 1, or 3), at most its money, and marks it 2.
//
// Refunds are a configuration switch (Config.Refunds), off by default: many gateways do not
// enable the API. Off, Refund answers domain.ErrUnsupported and the money goes back by hand.
// On, Refund returns the whole amount, and since epay has no refund number to make a refund
// idempotent, it guards by the order's status: it reads the order first (status 2: succeeded,
// without a second call; 0: refused, nothing was paid), then asks for the refund by trade_no;
// a success answer is succeeded; a refusal, or an answer that is no answer, is judged on the
// order read again (2: succeeded — an earlier attempt got there; otherwise refused with the
// gateway's code and message). Transport failures and 5xx are domain.ErrUnavailable: the retry's
// first read tells whether the lost attempt refunded. ProviderRef is the trade_no (epay has no
// id for a refund). No notification tells of a refund.
//
// The window this leaves, which only the caller can close: two attempts at one payment at the
// same time both find the order paid and both ask; the gateway's own check (status 1) refuses
// the later one only if the earlier has already marked the order, and its check-then-refund is
// not atomic. The caller must run one refund of a payment at a time (its PAID → REFUNDING
// transition wins once). And a gateway that refunded at the payment channel but failed before
// marking the order refunded, or that answers success without marking it, leaves status 1: a
// retry after a lost answer then asks the channel again.
//
// What epay v1 does not have, and what follows from it:
//   - No failure notification: only TRADE_SUCCESS means paid; any other status is pending.
//   - No timestamp or nonce in a notification: a captured notification stays valid forever.
//     Replay protection rests on the order's state (a paid order is not paid twice), on the
//     confirming query and on the application's dedupe of EventID (trade_no and status).
//   - No expiry parameter and no close API: Close returns domain.ErrUnsupported; a payment
//     stays payable at the gateway after the order expired, so a late TRADE_SUCCESS is the
//     application's to handle (query, never overwrite a final state).
//   - Amounts are yuan with 2 decimals: the gateway supports CNY only, and a notification's
//     money must be an exact "d.dd" amount.
//   - The notify URL must have no query: the gateway appends its own parameters to it, and
//     extra ones would break the signature.
//
// It imports the domain and the standard library only.
package epay
