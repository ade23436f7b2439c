package wechatpay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"cardshop/domain"
)

// The headers of WeChat Pay's signed answers and notifications.
const (
	HeaderTimestamp     = "Wechatpay-Timestamp"
	HeaderNonce         = "Wechatpay-Nonce"
	HeaderSignature     = "Wechatpay-Signature"
	HeaderSerial        = "Wechatpay-Serial"
	HeaderSignatureType = "Wechatpay-Signature-Type"
)

// SignatureType is the one signature scheme accepted (the Authorization scheme, and the
// optional Wechatpay-Signature-Type of a notification).
const SignatureType = "WECHATPAY2-SHA256-RSA2048"

// Tolerance is how far a signature's timestamp may be from now: WeChat Pay's rule refuses
// |now − timestamp| ≥ 5 minutes.
const Tolerance = 5 * time.Minute

// Bounds on the signature headers, so that a hostile one costs little.
const (
	maxNonce     = 64
	maxSignature = 1024 // base64 of an RSA signature up to 6144 bits
	maxSerial    = 80
)

// NonceSize is the AEAD_AES_256_GCM nonce length of a notification's resource: GCM with a
// 12-byte nonce, as WeChat Pay uses it (crypto/cipher panics on another length).
const NonceSize = 12

// Message is what WeChat Pay signs in an answer or a notification: "<ts>\n<nonce>\n<body>\n".
func Message(ts, nonce string, body []byte) string {
	return ts + "\n" + nonce + "\n" + string(body) + "\n"
}

// one returns the single value of header k, or an error when it is missing, repeated or
// longer than limit.
func one(h domain.Header, k string, limit int) (string, error) {
	vs := h.Values(k)
	if len(vs) != 1 || vs[0] == "" {
		return "", fmt.Errorf("%w: %s missing or repeated", domain.ErrBadSignature, k)
	}
	if len(vs[0]) > limit {
		return "", fmt.Errorf("%w: %s too long", domain.ErrBadSignature, k)
	}
	return vs[0], nil
}

// checkSignature accepts a message whose Wechatpay-Timestamp is within Tolerance of at (either
// way) and whose Wechatpay-Signature verifies under the key Wechatpay-Serial names: a
// configured platform certificate's serial number or the public key's id. Every refusal
// wraps domain.ErrBadSignature.
func (g *Gateway) checkSignature(ctx context.Context, h domain.Header, body []byte, at time.Time) error {
	ts, err := one(h, HeaderTimestamp, 12)
	if err != nil {
		return err
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sec < 0 || strconv.FormatInt(sec, 10) != ts {
		return fmt.Errorf("%w: malformed %s", domain.ErrBadSignature, HeaderTimestamp)
	}
	if d := at.Sub(time.Unix(sec, 0)); d >= Tolerance || d <= -Tolerance {
		return fmt.Errorf("%w: timestamp outside the %s window", domain.ErrBadSignature, Tolerance)
	}
	nonce, err := one(h, HeaderNonce, maxNonce)
	if err != nil {
		return err
	}
	sig, err := one(h, HeaderSignature, maxSignature)
	if err != nil {
		return err
	}
	serial, err := one(h, HeaderSerial, maxSerial)
	if err != nil {
		return err
	}
	if t := h.Values(HeaderSignatureType); len(t) > 1 || (len(t) == 1 && t[0] != SignatureType) {
		return fmt.Errorf("%w: signature type is not %s", domain.ErrBadSignature, SignatureType)
	}
	v, ok := g.keys[serial]
	if !ok {
		return fmt.Errorf("%w: %s %q is neither a configured platform certificate nor the public key", domain.ErrBadSignature, HeaderSerial, serial)
	}
	if err := v.Verify(ctx, serial, Message(ts, nonce, body), sig); err != nil {
		return fmt.Errorf("%w: the signature does not verify under %s", domain.ErrBadSignature, serial)
	}
	return nil
}

// Decrypt opens a notification's AEAD_AES_256_GCM resource: ciphertext base64, nonce and
// associated data as sent, key the API v3 key. It checks what the SDK's helper does not: a
// 12-byte nonce.
func Decrypt(v3key, nonce, associatedData, ciphertext string) ([]byte, error) {
	if len(v3key) != 32 {
		return nil, errors.New("the API v3 key is not 32 bytes")
	}
	if len(nonce) != NonceSize {
		return nil, errors.New("the nonce is not 12 bytes")
	}
	plain, err := utils.DecryptAES256GCM(v3key, associatedData, nonce, ciphertext)
	if err != nil {
		return nil, errors.New("the resource does not decrypt under the API v3 key")
	}
	return []byte(plain), nil
}
