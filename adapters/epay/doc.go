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
//     status 1 when paid. The KEY travels in that URL: it is never logged, and errors never
//     carry it.
//
// What epay v1 does not have, and what follows from it:
//   - No failure notification: only TRADE_SUCCESS means paid; any other status is pending.
//   - No timestamp or nonce in a notification: a captured notification stays valid forever.
//     Replay protection rests on the order's state (a paid order is not paid twice) and on the
//     application's dedupe of EventID (trade_no and status).
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
