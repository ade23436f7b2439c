package wechatpay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/credentials"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/signers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"

	"cardshop/domain"
)

// Name is the provider's name, as in the notify URL.
const Name domain.Provider = "wechatpay"

// DefaultBaseURL is WeChat Pay's API.
const DefaultBaseURL = "https://api.mch.weixin.qq.com"

// DefaultTimeout bounds one API call when the configuration brings no HTTP client.
const DefaultTimeout = 10 * time.Second

// MinRSABits is the smallest RSA key accepted (WeChat Pay's keys are RSA 2048).
const MinRSABits = 2048

// Config configures a Gateway. Every key is refused when missing or malformed.
type Config struct {
	// BaseURL is the API's address: DefaultBaseURL when empty. Plain http is allowed only to a
	// loopback address (a simulator).
	BaseURL string
	// MchID is the merchant number (商户号); AppID the app (公众号, 小程序, …) the payments are for.
	MchID string
	AppID string
	// MerchantSerial is the serial number of the merchant API certificate, MerchantPrivateKeyPEM
	// its private key (PKCS #8 or PKCS #1 PEM): they sign every request.
	MerchantSerial        string
	MerchantPrivateKeyPEM string
	// APIv3Key is the 32-character API v3 key: it decrypts notifications.
	APIv3Key string
	// PlatformCertificatesPEM are WeChat Pay platform certificates (each selected by its serial
	// number in Wechatpay-Serial); PublicKeyID (PUB_KEY_ID_…) and PublicKeyPEM the WeChat Pay
	// public key. At least one of the two; both while a merchant migrates from one to the
	// other, as WeChat Pay then signs with either.
	PlatformCertificatesPEM []string
	PublicKeyID             string
	PublicKeyPEM            string
	// RefundNotifyURL receives refund notifications (https, no query): sent with every refund.
	// Empty: WeChat Pay uses the refund notify URL set in the merchant platform.
	RefundNotifyURL string
	// HTTPClient makes the API calls; it must have a Timeout. Nil: a client with DefaultTimeout.
	HTTPClient *http.Client
	// Clock gives now for expiry checks, response freshness and a notification without an
	// arrival time. Nil: the wall clock.
	Clock domain.Clock
}

// Format prints the configuration without its secrets, for every verb.
func (c Config) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "wechatpay.Config{BaseURL:%q MchID:%q AppID:%q MerchantSerial:%q MerchantPrivateKey:%s APIv3Key:%s PlatformCertificates:%d PublicKeyID:%q}",
		c.BaseURL, c.MchID, c.AppID, c.MerchantSerial, redact(c.MerchantPrivateKeyPEM), redact(c.APIv3Key), len(c.PlatformCertificatesPEM), c.PublicKeyID)
}

// LogValue logs the configuration without its secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", c.BaseURL), slog.String("mchid", c.MchID), slog.String("appid", c.AppID),
		slog.String("merchant_serial", c.MerchantSerial), slog.String("merchant_private_key", redact(c.MerchantPrivateKeyPEM)),
		slog.String("api_v3_key", redact(c.APIv3Key)), slog.Int("platform_certificates", len(c.PlatformCertificatesPEM)),
		slog.String("public_key_id", c.PublicKeyID))
}

func redact(s string) string {
	if s == "" {
		return `""`
	}
	return domain.Redacted
}

var (
	mchIDShape  = regexp.MustCompile(`^[0-9]{6,32}$`)
	appIDShape  = regexp.MustCompile(`^wx[0-9A-Za-z]{16}$`)
	serialShape = regexp.MustCompile(`^[0-9A-Fa-f]{8,64}$`)
	v3KeyShape  = regexp.MustCompile(`^[A-Za-z0-9]{32}$`)
	pubKeyID    = regexp.MustCompile(`^PUB_KEY_ID_[0-9A-Za-z]{1,64}$`)
	// placeholders are words a key made up by hand starts with.
	placeholders = []string{"xxxx", "your", "change", "placeholder", "example", "replace", "secret", "dummy", "apiv3", "test"}
)

// CheckMchID refuses a merchant number New refuses.
func CheckMchID(s string) error {
	if !mchIDShape.MatchString(s) {
		return errors.New("wechatpay: the merchant number (mchid) is missing or not 6 to 32 digits")
	}
	return nil
}

// CheckAppID refuses an appid New refuses.
func CheckAppID(s string) error {
	if !appIDShape.MatchString(s) {
		return errors.New("wechatpay: the appid is missing or not shaped like wx and 16 letters or digits")
	}
	return nil
}

// CheckSerial refuses a merchant certificate serial number New refuses.
func CheckSerial(s string) error {
	if !serialShape.MatchString(s) {
		return errors.New("wechatpay: the merchant certificate serial number is missing or not hexadecimal")
	}
	return nil
}

// CheckPrivateKey refuses a merchant private key New refuses (the error never quotes it).
func CheckPrivateKey(s string) error {
	_, err := parsePrivateKey(s)
	return err
}

// CheckAPIv3Key refuses an API v3 key New refuses (the error never quotes it).
func CheckAPIv3Key(s string) error { return checkV3Key(s) }

// CheckPublicKeyID refuses a WeChat Pay public key id New refuses.
func CheckPublicKeyID(s string) error {
	if !pubKeyID.MatchString(s) {
		return errors.New("wechatpay: the public key id is not PUB_KEY_ID_ and letters or digits")
	}
	return nil
}

// CheckPublicKey refuses a WeChat Pay public key New refuses.
func CheckPublicKey(s string) error {
	_, err := parsePublicKey(s)
	return err
}

// CheckPlatformCertificate refuses a platform certificate New refuses.
func CheckPlatformCertificate(s string) error {
	if _, err := parseCertificate(s); err != nil {
		return fmt.Errorf("wechatpay: platform certificate: %w", err)
	}
	return nil
}

// CheckBaseURL refuses a base URL New refuses.
func CheckBaseURL(s string) error {
	_, err := baseURL(s)
	return err
}

// checkV3Key refuses a key that is not 32 letters and digits, or that is a placeholder: one
// repeated character, fewer than 10 distinct characters, or a placeholder word at its start.
func checkV3Key(k string) error {
	if k == "" {
		return errors.New("wechatpay: the API v3 key is empty")
	}
	if !v3KeyShape.MatchString(k) {
		return errors.New("wechatpay: the API v3 key is not 32 letters and digits")
	}
	distinct := map[rune]bool{}
	for _, r := range k {
		distinct[r] = true
	}
	if len(distinct) < 10 {
		return errors.New("wechatpay: the API v3 key is a placeholder")
	}
	low := strings.ToLower(k)
	for _, p := range placeholders {
		if strings.HasPrefix(low, p) {
			return errors.New("wechatpay: the API v3 key is a placeholder")
		}
	}
	return nil
}

// New returns the gateway. It refuses a missing or malformed merchant number, app id, merchant
// serial, private key (RSA of at least 2048 bits), API v3 key, platform certificate or public
// key (at least one of them; RSA keys only), a refund notify URL that is not https without a
// query, a base URL that would send signed requests in clear to another host, and an HTTP
// client without a timeout. Nothing is fetched: the platform certificates and the public key
// are the configuration's.
func New(cfg Config) (*Gateway, error) {
	if err := CheckMchID(cfg.MchID); err != nil {
		return nil, err
	}
	if err := CheckAppID(cfg.AppID); err != nil {
		return nil, err
	}
	if err := CheckSerial(cfg.MerchantSerial); err != nil {
		return nil, err
	}
	priv, err := parsePrivateKey(cfg.MerchantPrivateKeyPEM)
	if err != nil {
		return nil, err
	}
	if err := checkV3Key(cfg.APIv3Key); err != nil {
		return nil, err
	}
	g := &Gateway{mchid: cfg.MchID, appid: cfg.AppID, v3key: domain.Secret(cfg.APIv3Key), client: cfg.HTTPClient, clock: cfg.Clock,
		refundNotify: cfg.RefundNotifyURL, keys: map[string]auth.Verifier{}}
	g.creds = &credentials.WechatPayCredentials{Signer: &signers.SHA256WithRSASigner{
		MchID: cfg.MchID, CertificateSerialNo: strings.ToUpper(cfg.MerchantSerial), PrivateKey: priv}}
	if err := g.addVerifiers(cfg); err != nil {
		return nil, err
	}
	if cfg.RefundNotifyURL != "" {
		if err := checkNotifyURL(cfg.RefundNotifyURL); err != nil {
			return nil, fmt.Errorf("wechatpay: the refund notify URL: %w", err)
		}
	}
	if g.base, err = baseURL(cfg.BaseURL); err != nil {
		return nil, err
	}
	if g.client == nil {
		g.client = &http.Client{Timeout: DefaultTimeout}
	} else if g.client.Timeout <= 0 {
		return nil, errors.New("wechatpay: the HTTP client has no timeout")
	}
	if g.clock == nil {
		g.clock = wallClock{}
	}
	return g, nil
}

// addVerifiers keys one SDK verifier by each serial WeChat Pay may name in Wechatpay-Serial:
// each platform certificate's serial number and the public key's id. It also picks the serial
// every request names in its own Wechatpay-Serial, as the SDK's client does: the public key's
// id when there is one, else the newest certificate's (the latest NotBefore; the first given
// of equals). While a merchant switches from certificates to the public key, WeChat Pay signs
// an answer with the key the request names and with a certificate when it names none, so a
// merchant who configured only the public key could verify no answer without it.
func (g *Gateway) addVerifiers(cfg Config) error {
	if len(cfg.PlatformCertificatesPEM) == 0 && cfg.PublicKeyID == "" && cfg.PublicKeyPEM == "" {
		return errors.New("wechatpay: neither a platform certificate nor a WeChat Pay public key")
	}
	certs := map[string]*x509.Certificate{}
	var newest *x509.Certificate
	for i, p := range cfg.PlatformCertificatesPEM {
		c, err := parseCertificate(p)
		if err != nil {
			return fmt.Errorf("wechatpay: platform certificate #%d: %w", i+1, err)
		}
		serial := fmt.Sprintf("%X", c.SerialNumber.Bytes())
		if _, dup := certs[serial]; dup {
			return fmt.Errorf("wechatpay: platform certificate %s given twice", serial)
		}
		certs[serial] = c
		if newest == nil || c.NotBefore.After(newest.NotBefore) {
			newest, g.acceptSerial = c, serial
		}
	}
	if len(certs) > 0 {
		v := verifiers.NewSHA256WithRSAVerifier(core.NewCertificateMap(certs))
		for serial := range certs {
			g.keys[serial] = v
		}
	}
	if cfg.PublicKeyID != "" || cfg.PublicKeyPEM != "" {
		if err := CheckPublicKeyID(cfg.PublicKeyID); err != nil {
			return err
		}
		pub, err := parsePublicKey(cfg.PublicKeyPEM)
		if err != nil {
			return err
		}
		if _, dup := g.keys[cfg.PublicKeyID]; dup {
			return errors.New("wechatpay: the public key id is also a certificate serial")
		}
		g.keys[cfg.PublicKeyID] = verifiers.NewSHA256WithRSAPubkeyVerifier(cfg.PublicKeyID, *pub)
		g.acceptSerial = cfg.PublicKeyID
	}
	return nil
}

func pemBlock(s, what string) (*pem.Block, error) {
	b, _ := pem.Decode([]byte(strings.TrimSpace(s)))
	if b == nil {
		return nil, fmt.Errorf("wechatpay: the %s is missing or not PEM", what)
	}
	return b, nil
}

// parsePrivateKey reads the merchant's RSA private key, PKCS #8 or PKCS #1.
func parsePrivateKey(s string) (*rsa.PrivateKey, error) {
	b, err := pemBlock(s, "merchant private key")
	if err != nil {
		return nil, err
	}
	var key any
	if key, err = x509.ParsePKCS8PrivateKey(b.Bytes); err != nil {
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	}
	rk, ok := key.(*rsa.PrivateKey)
	if err != nil || !ok {
		return nil, errors.New("wechatpay: the merchant private key is not an RSA private key")
	}
	if rk.N.BitLen() < MinRSABits {
		return nil, errors.New("wechatpay: the merchant private key is shorter than 2048 bits")
	}
	return rk, nil
}

// parseCertificate reads a platform certificate with an RSA key of at least 2048 bits (the
// SDK's certificate verifier assumes RSA).
func parseCertificate(s string) (*x509.Certificate, error) {
	b, err := pemBlock(s, "platform certificate")
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, errors.New("not an X.509 certificate")
	}
	k, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok || k.N.BitLen() < MinRSABits {
		return nil, errors.New("not an RSA key of at least 2048 bits")
	}
	return c, nil
}

// parsePublicKey reads the WeChat Pay public key (PKIX PEM).
func parsePublicKey(s string) (*rsa.PublicKey, error) {
	b, err := pemBlock(s, "WeChat Pay public key")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	rk, ok := k.(*rsa.PublicKey)
	if err != nil || !ok || rk.N.BitLen() < MinRSABits {
		return nil, errors.New("wechatpay: the WeChat Pay public key is not an RSA key of at least 2048 bits")
	}
	return rk, nil
}

// checkNotifyURL accepts what WeChat Pay accepts as a notify_url: absolute https, no
// credentials, no query, no fragment.
func checkNotifyURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return errors.New("not an absolute https URL")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#") {
		return errors.New("WeChat Pay takes a notify URL without query or fragment")
	}
	if len(s) > 256 {
		return errors.New("longer than 256 characters")
	}
	return nil
}

func baseURL(base string) (*url.URL, error) {
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New("wechatpay: the base URL is not an absolute http(s) URL without query or credentials")
	}
	switch u.Scheme {
	case "https":
	case "http":
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, errors.New("wechatpay: plain http is allowed to a loopback address only")
		}
	default:
		return nil, errors.New("wechatpay: the base URL is not an absolute http(s) URL")
	}
	return u, nil
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
