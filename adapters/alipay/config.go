package alipay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
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

	"cardshop/domain"
)

// Name is the provider's name, as in the notify URL, unless the configuration says otherwise.
const Name domain.Provider = "alipay"

// The gateways.
const (
	DefaultGatewayURL = "https://openapi.alipay.com/gateway.do"
	SandboxGatewayURL = "https://openapi-sandbox.dl.alipaydev.com/gateway.do"
)

// DefaultTimeout bounds one call to the gateway when the configured client has no timeout.
const DefaultTimeout = 10 * time.Second

// MinKeyBits is the smallest RSA modulus accepted: RSA2 is SHA256withRSA with 2048-bit keys,
// and Alipay issues nothing shorter.
const MinKeyBits = 2048

// Method is how a payment is created.
type Method string

// The methods.
const (
	// MethodPrecreate is alipay.trade.precreate (当面付, scan to pay): the shop asks for the
	// trade and shows qr_code as a QR code.
	MethodPrecreate Method = "precreate"
	// MethodPage is alipay.trade.page.pay (电脑网站支付): PayURL is the signed gateway URL the
	// buyer's browser is sent to.
	MethodPage Method = "page"
	// MethodWap is alipay.trade.wap.pay (手机网站支付): the same on a phone.
	MethodWap Method = "wap"
)

// ParseMethod reads a method from configuration: precreate, page or wap.
func ParseMethod(s string) (Method, error) {
	switch m := Method(s); m {
	case MethodPrecreate, MethodPage, MethodWap:
		return m, nil
	}
	return "", fmt.Errorf("alipay method %q: want precreate, page or wap", s)
}

// Config configures a Gateway.
type Config struct {
	// Name is the provider's name in the notify URL; Name ("alipay") when empty.
	Name domain.Provider
	// GatewayURL is the API's gateway.do: DefaultGatewayURL when empty, SandboxGatewayURL, or a
	// simulator's. Plain http is allowed to a loopback address only.
	GatewayURL string
	// AppID is the application's id (app_id).
	AppID string
	// SellerID is the merchant's Alipay user id (seller_id, 2088…), optional: when set, a
	// notification for another seller is refused.
	SellerID string
	// PrivateKey is the merchant's (the application's, 应用私钥) RSA private key, PEM (PKCS#1
	// "RSA PRIVATE KEY" or PKCS#8 "PRIVATE KEY") or the bare base64 Alipay's key tool prints.
	// It signs every request.
	PrivateKey domain.Secret
	// AlipayPublicKey is Alipay's public key (支付宝公钥, not the application's): it verifies
	// notifications and answers. PEM ("PUBLIC KEY") or bare base64.
	AlipayPublicKey string
	// Method is how payments are created; MethodPage when empty.
	Method Method
	// HTTPClient calls the gateway; nil for one with DefaultTimeout. It is copied; the copy
	// gets DefaultTimeout when it has none and follows no redirects (an API that redirects is
	// not answering).
	HTTPClient *http.Client
	// Clock gives the request timestamps; the wall clock when nil.
	Clock domain.Clock
}

// Format prints the configuration without the private key, for every verb.
func (c Config) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "alipay.Config{Name:%q GatewayURL:%q AppID:%q SellerID:%q PrivateKey:%s Method:%q}",
		c.Name, c.GatewayURL, c.AppID, c.SellerID, c.PrivateKey.String(), c.Method)
}

// LogValue logs the configuration without the private key.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("gateway_url", c.GatewayURL), slog.String("app_id", c.AppID),
		slog.String("seller_id", c.SellerID), slog.String("private_key", c.PrivateKey.String()), slog.String("method", string(c.Method)))
}

// Gateway is the Alipay provider. It is safe for concurrent use.
type Gateway struct {
	name     domain.Provider
	endpoint string // gateway.do
	appID    string
	sellerID string
	key      *rsa.PrivateKey
	alipay   *rsa.PublicKey
	method   Method
	client   *http.Client
	clock    domain.Clock
}

var _ domain.PaymentGateway = (*Gateway)(nil)

var (
	appIDPattern  = regexp.MustCompile(`^[0-9]{1,32}$`)
	sellerPattern = regexp.MustCompile(`^2088[0-9]{12}$`)
)

// New checks cfg and returns a Gateway. It refuses a missing or malformed key, a key shorter
// than MinKeyBits, Alipay's public key equal to the application's own (the usual mix-up of
// 应用公钥 and 支付宝公钥: every notification would fail), and a gateway URL that would
// send signed requests in clear to another host.
func New(cfg Config) (*Gateway, error) {
	name := cfg.Name
	if name == "" {
		name = Name
	}
	if _, err := domain.ParseProvider(string(name)); err != nil {
		return nil, fmt.Errorf("alipay provider name %q: %w", name, err)
	}
	endpoint, err := checkGatewayURL(cfg.GatewayURL)
	if err != nil {
		return nil, err
	}
	if err := CheckAppID(cfg.AppID); err != nil {
		return nil, err
	}
	if cfg.SellerID != "" {
		if err := CheckSellerID(cfg.SellerID); err != nil {
			return nil, err
		}
	}
	key, err := ParsePrivateKey(cfg.PrivateKey.Reveal())
	if err != nil {
		return nil, err
	}
	pub, err := ParsePublicKey(cfg.AlipayPublicKey)
	if err != nil {
		return nil, err
	}
	if pub.Equal(&key.PublicKey) {
		return nil, errors.New("alipay public key is the application's own public key: configure Alipay's public key (支付宝公钥)")
	}
	method := cfg.Method
	if method == "" {
		method = MethodPage
	}
	if _, err := ParseMethod(string(method)); err != nil {
		return nil, err
	}
	client := &http.Client{}
	if cfg.HTTPClient != nil {
		*client = *cfg.HTTPClient
	}
	if client.Timeout <= 0 {
		client.Timeout = DefaultTimeout
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	clock := cfg.Clock
	if clock == nil {
		clock = wallClock{}
	}
	return &Gateway{name: name, endpoint: endpoint, appID: cfg.AppID, sellerID: cfg.SellerID, key: key,
		alipay: pub, method: method, client: client, clock: clock}, nil
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// CheckAppID refuses an app_id New refuses.
func CheckAppID(s string) error {
	if !appIDPattern.MatchString(s) {
		return errors.New("alipay app_id must be 1 to 32 digits")
	}
	return nil
}

// CheckSellerID refuses a seller_id New refuses.
func CheckSellerID(s string) error {
	if !sellerPattern.MatchString(s) {
		return errors.New("alipay seller_id must be 16 digits starting with 2088")
	}
	return nil
}

// CheckGatewayURL refuses a gateway URL New refuses.
func CheckGatewayURL(s string) error {
	_, err := checkGatewayURL(s)
	return err
}

func checkGatewayURL(s string) (string, error) {
	if s == "" {
		s = DefaultGatewayURL
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", errors.New("alipay gateway URL must be an absolute http(s) URL without credentials, query or fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", errors.New("alipay gateway URL: plain http is allowed to a loopback address only")
		}
	default:
		return "", errors.New("alipay gateway URL must be an absolute http(s) URL")
	}
	return u.String(), nil
}

// der reads a PEM block of one of the types, or bare base64 (the form Alipay's console and key
// tool show).
func der(s string, types ...string) ([]byte, string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, "", errors.New("empty")
	}
	if strings.HasPrefix(s, "-----BEGIN") {
		b, rest := pem.Decode([]byte(s))
		if b == nil {
			return nil, "", errors.New("not PEM")
		}
		if len(strings.TrimSpace(string(rest))) != 0 {
			return nil, "", errors.New("more than one PEM block")
		}
		for _, t := range types {
			if b.Type == t {
				return b.Bytes, t, nil
			}
		}
		return nil, "", fmt.Errorf("PEM block %q, want %s", b.Type, strings.Join(types, " or "))
	}
	b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		return nil, "", errors.New("neither PEM nor base64")
	}
	return b, "", nil
}

// ParsePrivateKey reads the application's RSA private key: PEM PKCS#1 or PKCS#8, or bare base64
// of either. Errors never quote the key.
func ParsePrivateKey(s string) (*rsa.PrivateKey, error) {
	b, typ, err := der(s, "RSA PRIVATE KEY", "PRIVATE KEY")
	if err != nil {
		return nil, fmt.Errorf("alipay private key: %v", err)
	}
	var key *rsa.PrivateKey
	if typ != "PRIVATE KEY" {
		key, err = x509.ParsePKCS1PrivateKey(b)
	}
	if typ == "PRIVATE KEY" || (typ == "" && err != nil) {
		var k any
		if k, err = x509.ParsePKCS8PrivateKey(b); err == nil {
			var ok bool
			if key, ok = k.(*rsa.PrivateKey); !ok {
				return nil, errors.New("alipay private key: not an RSA key")
			}
		}
	}
	if err != nil {
		return nil, errors.New("alipay private key: not a PKCS#1 or PKCS#8 RSA private key")
	}
	if key.N.BitLen() < MinKeyBits {
		return nil, fmt.Errorf("alipay private key: %d bits, want at least %d (RSA2)", key.N.BitLen(), MinKeyBits)
	}
	if err := key.Validate(); err != nil {
		return nil, errors.New("alipay private key: inconsistent")
	}
	return key, nil
}

// ParsePublicKey reads Alipay's RSA public key: PEM "PUBLIC KEY" (PKIX) or "RSA PUBLIC KEY"
// (PKCS#1), or bare base64 of the PKIX form (what Alipay's console shows).
func ParsePublicKey(s string) (*rsa.PublicKey, error) {
	b, typ, err := der(s, "PUBLIC KEY", "RSA PUBLIC KEY")
	if err != nil {
		return nil, fmt.Errorf("alipay public key: %v", err)
	}
	var pub *rsa.PublicKey
	if typ == "RSA PUBLIC KEY" {
		pub, err = x509.ParsePKCS1PublicKey(b)
	} else {
		var k any
		if k, err = x509.ParsePKIXPublicKey(b); err == nil {
			var ok bool
			if pub, ok = k.(*rsa.PublicKey); !ok {
				return nil, errors.New("alipay public key: not an RSA key")
			}
		}
	}
	if err != nil {
		return nil, errors.New("alipay public key: not an RSA public key")
	}
	if pub.N.BitLen() < MinKeyBits {
		return nil, fmt.Errorf("alipay public key: %d bits, want at least %d (RSA2)", pub.N.BitLen(), MinKeyBits)
	}
	return pub, nil
}
