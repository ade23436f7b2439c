package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// The hand-appended order answer is byte for byte what encoding/json writes; an answer it
// cannot write so (a reason, an end, an admin field, codes, a text to escape, a year past
// 9999) is left to encoding/json.
func TestOrderJSONIsEncodingJSONs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	texts := []string{"2612030626571075594632332823", "CNY", "PENDING", "", "a\"b", `a\b`, "<x>", "a&b", "ü", "\x01", "~ !#"}
	zones := []*time.Location{time.UTC, time.FixedZone("X", -7*3600-30*60), time.Local}
	at := func() time.Time {
		return time.Unix(rng.Int64N(1e10), rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(len(zones))])
	}
	now := time.Now()
	fast := 0
	for range 5000 {
		r := orderResponse{OrderNo: texts[rng.IntN(len(texts))], ProductID: rng.Int64() - rng.Int64(), Qty: rng.IntN(100) - 5,
			UnitPrice: rng.Int64(), Amount: -rng.Int64N(10), Currency: texts[rng.IntN(len(texts))], Status: texts[rng.IntN(len(texts))],
			CreatedAt: at(), ExpiresAt: at()}
		if rng.IntN(3) == 0 {
			r.Coupon, r.Discount = texts[rng.IntN(len(texts))], rng.Int64N(3)-1
		}
		switch rng.IntN(8) {
		case 0:
			r.Reason = "payment timeout"
		case 1:
			r.PaidAt = &now
		case 2:
			r.Codes = []string{"C-1"}
		case 3:
			r.BuyerID = "alice"
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := r.appendJSON(nil)
		if !ok {
			continue
		}
		fast++
		if string(got) != string(want) {
			t.Fatalf("appended\n%s\nencoding/json\n%s", got, want)
		}
	}
	if fast < 100 {
		t.Fatalf("only %d of 5000 answers took the fast path", fast)
	}
	r := orderResponse{OrderNo: "1", Currency: "CNY", Status: "PENDING", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, ok := r.appendJSON(nil); ok {
		t.Fatal("a year past 9999 took the fast path (encoding/json refuses it)")
	}
}
