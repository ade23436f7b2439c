package epay_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"cardshop/adapters/epay"
	"cardshop/adapters/lab/paysim/epaysim"
	"cardshop/domain"
)

// The vectors were computed outside this code (printf '%s' "<string>" | md5sum) or published
// with the same algorithm: sorted "k=v&…" with raw values, then the KEY.
func TestSignVectors(t *testing.T) {
	cases := []struct {
		name    string
		params  epay.Params
		key     domain.Secret
		variant epay.SignVariant
		str     string
		sign    string
	}{
		{
			// Published example of the algorithm (kancloud "defupay" docs, 签名生成算法).
			name:   "published, key appended",
			params: epay.Params{"uid": "1000", "timestamp": "1548047628", "sign": "ignored"},
			key:    "58b31d465652be856d7ed80977aa4ce4",
			str:    "timestamp=1548047628&uid=100058b31d465652be856d7ed80977aa4ce4",
			sign:   "15540d3398e5ed2a37533e3fc032e1a0",
		},
		{
			// Published example (easydoc 签名生成方式): the URL is signed unescaped.
			name: "published, raw URL",
			params: epay.Params{"apiKey": "testApiKey", "customerNo": "test100000", "channel": "bank",
				"amount": "100.00", "notifyUrl": "http://test.com/getNotify", "ip": "127.0.0.1"},
			key:  "testSecretKey",
			str:  "amount=100.00&apiKey=testApiKey&channel=bank&customerNo=test100000&ip=127.0.0.1&notifyUrl=http://test.com/getNotifytestSecretKey",
			sign: "5d50a182db6fa8a347cc85f36ca492f2",
		},
		{
			// An epay create, computed with md5sum: UTF-8 and a space in name, a query in a
			// URL, an empty value, sign and sign_type left out.
			name: "epay create, key appended",
			params: epay.Params{"pid": "1001", "type": "alipay", "out_trade_no": "20240101123456",
				"notify_url": "http://www.example.com/notify_url.php?a=1", "return_url": "http://www.example.com/return_url.php",
				"name": "VIP会员 1个", "money": "1.00", "param": "", "sign": "x", "sign_type": "MD5"},
			key:  "89unJUB8HZ54Hj7x4nUj56HN4nUzUJ8i",
			str:  "money=1.00&name=VIP会员 1个&notify_url=http://www.example.com/notify_url.php?a=1&out_trade_no=20240101123456&pid=1001&return_url=http://www.example.com/return_url.php&type=alipay89unJUB8HZ54Hj7x4nUj56HN4nUzUJ8i",
			sign: "5af8a32dca85a0ff6b89338790a44492",
		},
		{
			name: "epay create, &key=",
			params: epay.Params{"pid": "1001", "type": "alipay", "out_trade_no": "20240101123456",
				"notify_url": "http://www.example.com/notify_url.php?a=1", "return_url": "http://www.example.com/return_url.php",
				"name": "VIP会员 1个", "money": "1.00"},
			key:     "89unJUB8HZ54Hj7x4nUj56HN4nUzUJ8i",
			variant: epay.SignAmpKey,
			str:     "money=1.00&name=VIP会员 1个&notify_url=http://www.example.com/notify_url.php?a=1&out_trade_no=20240101123456&pid=1001&return_url=http://www.example.com/return_url.php&type=alipay&key=89unJUB8HZ54Hj7x4nUj56HN4nUzUJ8i",
			sign:    "01a404d66933c971c4d4a57e24b1d4be",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := epay.SigningString(c.params, c.key, c.variant); got != c.str {
				t.Fatalf("signing string\n got %q\nwant %q", got, c.str)
			}
			if got := epay.Sign(c.params, c.key, c.variant); got != c.sign {
				t.Fatalf("sign = %s, want %s", got, c.sign)
			}
		})
	}
}

// The gateway and the simulator sign independently; they must agree.
func TestSignAgreesWithSimulator(t *testing.T) {
	key := "0123456789abcdefKEY"
	for i := range 50 {
		p := epay.Params{}
		v := url.Values{}
		for j := range i%7 + 1 {
			k := fmt.Sprintf("k%d_%c", (i*7+j*3)%11, 'a'+rune(j))
			val := strings.Repeat("v&= 中", (i+j)%3) // empty values too
			p[k] = val
			v.Set(k, val)
		}
		for _, amp := range []bool{false, true} {
			variant := epay.SignAppend
			if amp {
				variant = epay.SignAmpKey
			}
			if a, b := epay.Sign(p, domain.Secret(key), variant), epaysim.Sign(v, key, amp); a != b {
				t.Fatalf("params %v amp=%v: gateway %s, simulator %s", p, amp, a, b)
			}
		}
	}
}

func TestKeyIsRedacted(t *testing.T) {
	k := domain.Secret("super-secret-merchant-key-123456")
	for _, s := range []string{k.String(), fmt.Sprint(k), fmt.Sprintf("%v %s %q %#v %x", k, k, k, k, k)} {
		if strings.Contains(s, "super") || strings.Contains(s, "7375706572") {
			t.Fatalf("key printed: %s", s)
		}
	}
	if b, _ := k.MarshalText(); string(b) != "[REDACTED]" {
		t.Fatalf("MarshalText = %s", b)
	}
	if domain.Secret("").String() != "" {
		t.Fatal("an empty key must print empty")
	}
}
