package httpapi

// parsePlaceOrder reads the body every storefront sends to POST /api/order without
// encoding/json: exactly `{"product_id":N,"qty":M}`, optionally with `"coupon":"CODE"` (CODE
// 1 to 64 of A-Z, a-z, 0-9, '-' and '_', without escapes) (the keys in any order, each once,
// spelled exactly, without escapes; JSON whitespace allowed between tokens; each number plain
// digits — no sign, fraction, exponent or leading zero — of at most 18 digits, so it fits its
// field). For every body it accepts, strictjson.Decode gives the same request and no error
// (FuzzParsePlaceOrder checks it); ok is false, and req zero, for any other body, which then takes
// strictjson's path and gets its answers (refusals included). It saves the token walk and the
// reflection decode of strictjson on the hottest request of a flash sale.
func parsePlaceOrder(b []byte) (req placeOrderRequest, ok bool) {
	p := orderParser{b: b}
	if !p.byte('{') {
		return placeOrderRequest{}, false
	}
	var seenProduct, seenQty, seenCoupon bool
	for i := 0; i < 3; i++ {
		if i > 0 && !p.byte(',') {
			break
		}
		switch {
		case p.literal(`"product_id"`) && !seenProduct:
			seenProduct = true
			n, ok := p.colonNumber()
			if !ok {
				return placeOrderRequest{}, false
			}
			req.ProductID = n
		case p.literal(`"qty"`) && !seenQty:
			seenQty = true
			n, ok := p.colonNumber()
			if !ok {
				return placeOrderRequest{}, false
			}
			req.Qty = int(n)
		case p.literal(`"coupon"`) && !seenCoupon:
			seenCoupon = true
			c, ok := p.colonPlainString()
			if !ok {
				return placeOrderRequest{}, false
			}
			req.Coupon = c
		default:
			return placeOrderRequest{}, false
		}
	}
	if !seenProduct || !seenQty || !p.byte('}') {
		return placeOrderRequest{}, false
	}
	if p.space(); p.i != len(p.b) {
		return placeOrderRequest{}, false
	}
	return req, true
}

// orderParser is parsePlaceOrder's position in the body.
type orderParser struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (p *orderParser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// byte skips whitespace and then c, reporting whether c was there.
func (p *orderParser) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// literal skips whitespace and then s if the body continues with it, reporting whether it did
// (when it does not, the position stays after the whitespace).
func (p *orderParser) literal(s string) bool {
	p.space()
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// colonNumber reads `: N` with N plain digits: no sign, fraction, exponent or leading zero,
// at most 18 digits.
func (p *orderParser) colonNumber() (int64, bool) {
	if !p.byte(':') {
		return 0, false
	}
	p.space()
	start := p.i
	var n int64
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	// "1.5", "1e3", "1E3": the number goes on; strictjson decides.
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	return n, true
}

// colonPlainString reads `: "S"` with S 1 to 64 of A-Z, a-z, 0-9, '-' and '_': a coupon code as
// buyers type it. Anything else (an escape, another character) is left to strictjson.
func (p *orderParser) colonPlainString() (string, bool) {
	if !p.byte(':') || !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) && p.i-start <= 64 {
		c := p.b[p.i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			break
		}
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 64 || p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	p.i++
	return string(p.b[start : start+n]), true
}
