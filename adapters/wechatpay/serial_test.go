package wechatpay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/wechatsim"
	"cardshop/adapters/wechatpay"
	"cardshop/domain"
)

// A merchant switching from platform certificates to the WeChat Pay public key who has
// configured only the public key: WeChat Pay signs an answer with the public key only when the
// request names it in Wechatpay-Serial, with the certificate otherwise. Every call succeeds
// because every request names it.
func TestMidSwitchAnswersVerifyForAMerchantWithThePublicKeyOnly(t *testing.T) {
	r := newRig(t, publicKeyOnly)
	r.sim.SignWith(wechatsim.SignMidSwitch)

	p, err := r.gw.Create(ctx, r.request(orderNo, 1998))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	open := domain.Payment{OrderNo: orderNo, Provider: wechatpay.Name, Amount: 1998, Currency: cny, Status: domain.PaymentOpen, QRCode: p.QRCode}
	if st, err := r.gw.Query(ctx, open); err != nil || st.Outcome != domain.OutcomePending {
		t.Fatalf("query: %+v %v", st, err)
	}
	if err := r.gw.Close(ctx, open); err != nil {
		t.Fatalf("close: %v", err)
	}
	if st, err := r.gw.Query(ctx, open); err != nil || st.Outcome != domain.OutcomeExpired {
		t.Fatalf("query after close: %+v %v", st, err)
	}

	paidNo := domain.OrderNo("2503011200001234123456789013")
	paid := r.create(paidNo, 500)
	if _, err := r.sim.PayNotification(string(paidNo)); err != nil {
		t.Fatal(err)
	}
	if st, err := r.gw.Query(ctx, paid); err != nil || st.Outcome != domain.OutcomePaid || st.Amount != 500 {
		t.Fatalf("query of the paid order: %+v %v", st, err)
	}
	paid.Status = domain.PaymentPaid
	r.sim.RefundAtOnce(true)
	if st, err := r.gw.Refund(ctx, paid, refundReq(paid)); err != nil || st.Outcome != domain.RefundSucceeded {
		t.Fatalf("refund: %+v %v", st, err)
	}
	if r.sim.PaidOut(string(paidNo)) != 500 {
		t.Fatalf("paid out %d", r.sim.PaidOut(string(paidNo)))
	}
	for _, q := range r.sim.Requests() {
		if q.Serial != r.sim.PublicKeyID() || !q.AuthOK {
			t.Fatalf("%s %s: Wechatpay-Serial %q, auth %v; want %s", q.Method, q.URI, q.Serial, q.AuthOK, r.sim.PublicKeyID())
		}
	}
}

// Every request names in Wechatpay-Serial the key the answer will be verified with, as the
// official SDK does: the public key's id when one is configured, else the newest platform
// certificate (the latest NotBefore), whatever the order they are configured in.
func TestRequestsNameTheKeyTheAnswerIsVerifiedWith(t *testing.T) {
	k := testKeys(t)
	older := certificate(t, k.public, start.AddDate(-4, 0, 0))
	for _, tc := range []struct {
		name string
		opt  rigOption
		want func(*wechatsim.Server) string
	}{
		{"certificate and public key", func(*wechatsim.Options, *wechatpay.Config, *wechatsim.Server) {},
			(*wechatsim.Server).PublicKeyID},
		{"public key only", publicKeyOnly, (*wechatsim.Server).PublicKeyID},
		{"certificate only", certificateOnly, (*wechatsim.Server).CertificateSerial},
		{"an older certificate first", func(_ *wechatsim.Options, c *wechatpay.Config, s *wechatsim.Server) {
			c.PublicKeyID, c.PublicKeyPEM = "", ""
			c.PlatformCertificatesPEM = []string{older, s.CertificatePEM()}
		}, (*wechatsim.Server).CertificateSerial},
		{"an older certificate last", func(_ *wechatsim.Options, c *wechatpay.Config, s *wechatsim.Server) {
			c.PublicKeyID, c.PublicKeyPEM = "", ""
			c.PlatformCertificatesPEM = []string{s.CertificatePEM(), older}
		}, (*wechatsim.Server).CertificateSerial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opt)
			r.sim.SignWith(wechatsim.SignMidSwitch)
			p := r.create(orderNo, 100)
			if _, err := r.gw.Query(ctx, p); err != nil {
				t.Fatal(err)
			}
			want := tc.want(r.sim)
			reqs := r.sim.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			for _, q := range reqs {
				if q.Serial != want {
					t.Fatalf("%s %s: Wechatpay-Serial %q, want %q", q.Method, q.URI, q.Serial, want)
				}
			}
		})
	}
}

// certificate is a self-signed platform certificate of key valid from notBefore for five years.
func certificate(t *testing.T, key *rsa.PrivateKey, notBefore time.Time) string {
	t.Helper()
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 150))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: sn.SetBit(sn, 152, 1), Subject: pkix.Name{CommonName: fmt.Sprintf("older platform certificate %x", sn)},
		NotBefore: notBefore, NotAfter: notBefore.AddDate(5, 0, 0), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
