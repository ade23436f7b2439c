// Package alipay is Alipay (支付宝 open platform, RSA2, public-key mode) as a
// domain.PaymentGateway: trades created by alipay.trade.precreate (a QR code), or by the signed
// redirect of alipay.trade.page.pay / alipay.trade.wap.pay; notifications verified; trades
// queried (alipay.trade.query), closed (alipay.trade.close) and refunded (alipay.trade.refund,
// read back with alipay.trade.fastpay.refund.query).
//
// It uses the standard library rather than an SDK (smartwalle/alipay or another): RSA2 signing
// and verification over the sorted "k=v&…" string is about forty lines with crypto/rsa and
// crypto/sha256, and owning them keeps the exact bytes verified, the error mapping and the
// redaction of the key in view, without three more modules in the build.
//
// The protocol, as Alipay's open documentation (opendocs.alipay.com) publishes it:
//   - Requests: app_id, method, format=JSON, charset=utf-8, sign_type=RSA2, timestamp
//     ("2006-01-02 15:04:05", China time), version=1.0, notify_url, biz_content (JSON of the
//     business parameters) and sign: base64 of SHA256withRSA, with the application's private
//     key, of every other non-empty parameter sorted by name and joined "k=v&…" unescaped.
//     Calls are POSTed as a form to gateway.do; page and wap are the same parameters as the
//     query of a GET the buyer's browser makes.
//   - Answers: JSON {"<method with _>_response": {code, msg, sub_code, sub_msg, …}, "sign": …};
//     sign is SHA256withRSA, with Alipay's key, of the exact bytes of the response object.
//     code 10000 is success; business refusals are 40004 with a sub_code (ACQ.*).
//   - Notifications: a form POST to notify_url (trade_status_sync); the signature covers every
//     parameter but sign and sign_type, empty ones skipped, sorted, "k=v&…" of the decoded
//     values, verified with Alipay's public key (not the application's). The answer is the
//     plain text "success"; anything else makes Alipay resend, 8 times over about 25 hours.
//
// Choices:
//   - Expiry: time_expire (absolute, the order's expiry) rather than timeout_express (relative,
//     counted from when Alipay creates the trade, which for precreate and the cashier pages is
//     when the buyer scans or logs in: a trade could then stay payable long after the order
//     expired). time_expire also makes every retry of a creation carry the same business
//     parameters, so Alipay sees one trade.
//   - Amounts: total_amount and refund_amount are domain.Currency.Format of CNY ("19.99");
//     amounts read back are parsed exactly (no rounding) and only CNY is supported.
//   - Merchant checks: a notification's app_id must be the configured one, and its seller_id
//     too when one is configured; otherwise it is refused as domain.ErrBadSignature whatever
//     its signature (Alipay signs every application's notifications with the same key).
//   - Statuses: TRADE_SUCCESS and TRADE_FINISHED are paid, TRADE_CLOSED expired, WAIT_BUYER_PAY
//     pending. A fully refunded trade is TRADE_CLOSED too: a query cannot tell it from an
//     expired one, so the caller never moves a paid payment back on a query.
//   - Refund notifications: when a refund moves money Alipay notifies the payment's notify_url
//     with the trade's new status (TRADE_CLOSED after a full refund) and out_biz_no (the
//     refund's out_request_no), refund_fee (the total refunded) and gmt_refund. A notification
//     with out_biz_no, gmt_refund or a refund_fee above zero is read as a refund's: RefundNo is
//     out_biz_no, RefundOutcome succeeded when refund_fee reaches total_amount (cardshop refunds
//     whole payments) and pending otherwise, Outcome pending (it says nothing about the
//     payment).
//   - Replays: notifications carry no signed freshness that Alipay documents as checkable
//     (notify_time changes between resends over 25 hours); replay protection rests on the
//     order's state and the application's dedupe of EventID (notify_id).
//   - Every answer acted on must be signed: an unsigned one (Alipay leaves some errors unsigned)
//     only ever becomes an error.
//
// It imports the domain and the standard library only.
package alipay
