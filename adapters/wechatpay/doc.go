// Package wechatpay is WeChat Pay API v3 (微信支付, direct merchants, Native payments) as a
// domain.PaymentGateway: the order placed at WeChat Pay and its code_url shown as a QR code,
// queried and closed by out_trade_no, refunded by out_refund_no, and WeChat Pay's signed,
// encrypted notifications verified, decrypted and mapped to notices.
//
// # What comes from the official SDK
//
// github.com/wechatpay-apiv3/wechatpay-go does the cryptography: the Authorization header of
// every request (WECHATPAY2-SHA256-RSA2048 over "METHOD\nURI\nts\nnonce\nbody\n" with the
// merchant key, core/auth/credentials and signers), the SHA256withRSA check of WeChat Pay's
// signatures with a platform certificate or the WeChat Pay public key (core/auth/verifiers),
// and the AEAD_AES_256_GCM decryption of a notification's resource (utils). The rest is here,
// because the SDK's versions do not fit:
//   - its service clients (services/payments/native, services/refunddomestic) write the
//     production host into every URL, so they cannot be pointed at a simulator; the requests
//     go over net/http with the SDK's Authorization;
//   - its response and notification validators check freshness against time.Now, and a
//     notification must be judged at its arrival (InboundRequest.At) on the shop's clock;
//     message, freshness and key selection by Wechatpay-Serial are therefore here, and only
//     the RSA check is the SDK's;
//   - its auto-updating certificate option downloads platform certificates from the production
//     host through a process-wide singleton at start; it is not used: the certificates and the
//     public key are configuration, and nothing is fetched;
//   - its GCM helper panics on a nonce that is not 12 bytes: Decrypt checks the length first;
//   - its certificate verifier assumes an RSA key: New refuses any other certificate.
//
// # Contract
//
// Create posts {appid, mchid, description, out_trade_no, time_expire (the order's expiry, RFC
// 3339 in +08:00), notify_url (https, no query: anything else is refused before sending),
// amount:{total in fen, currency CNY}} and returns code_url as the QR code. WeChat Pay treats
// a repeated out_trade_no with the same fields as the same order, so a retry after a lost
// answer is safe.
//
// Every answer, 2xx or a 4xx refusal, is checked like a notification: Wechatpay-Timestamp
// within 5 minutes of the shop's clock and a signature under the key Wechatpay-Serial names
// (a configured certificate serial or the PUB_KEY_ID_… of the public key: both while a
// merchant migrates). Every request names in its own Wechatpay-Serial the key its answer is
// verified with — the public key's id when one is configured, else the newest certificate's
// serial — because mid-switch WeChat Pay signs an answer with the key the request names and
// with a certificate when it names none. An unverified 2xx is an error; an unverified 4xx is an *APIError with
// Verified false, never taken as WeChat Pay's word (a refund is not marked refused on it).
// 5xx, 429, SYSTEM_ERROR and FREQUENCY_LIMITED are domain.ErrUnavailable.
//
// Verify accepts a POST whose Wechatpay-Signature is SHA256withRSA over
// "<Wechatpay-Timestamp>\n<Wechatpay-Nonce>\n<body>\n", fresh within 5 minutes of the arrival,
// decrypts the resource with the API v3 key and maps TRANSACTION.SUCCESS and REFUND.* (see
// Verify). A transaction of another mchid or appid is refused like a forged signature: it is
// not this merchant's to judge. Reply is 204 for accepted, 400 {"code":"FAIL",…} for refused.
//
// Query is GET /v3/pay/transactions/out-trade-no/{no}?mchid=…; Close POSTs …/{no}/close (204;
// ORDERPAID is domain.ErrAlreadyPaid). Refund POSTs /v3/refund/domestic/refunds with
// out_refund_no = RefundRequest.RefundNo: WeChat Pay keeps one refund per number, so asking
// again after a timeout never pays out twice.
//
// It imports the domain, the SDK (github.com/wechatpay-apiv3/wechatpay-go) and the standard
// library.
package wechatpay
