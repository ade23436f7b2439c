package epaysim

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// down answers 502 for everything while the gateway is down.
func (s *Sim) down(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		out := s.outage
		s.mu.Unlock()
		if out {
			s.record(r, "outage")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// submit is submit.php: the buyer's browser brings the signed order (GET or POST); the gateway
// records it and shows its cashier, or an error page (gateways answer 200 either way).
func (s *Sim) submit(w http.ResponseWriter, r *http.Request) {
	form := readForm(r)
	o, refused := s.accept(form, "submit.php")
	s.record(r, refused)
	if refused != "" {
		page(w, `<p class="error">`+html.EscapeString(refused)+`</p>`)
		return
	}
	page(w, cashierBody(o))
}

// mapi is mapi.php: the shop POSTs the signed order and gets JSON.
func (s *Sim) mapi(w http.ResponseWriter, r *http.Request) {
	form := readForm(r)
	o, refused := s.accept(form, "mapi.php")
	s.record(r, refused)
	if refused != "" {
		writeJSON(w, map[string]any{"code": -1, "msg": refused})
		return
	}
	answer := s.cfg.Answer
	if answer == "" {
		answer = "payurl"
		if o.Type == "wxpay" {
			answer = "qrcode"
		}
	}
	out := map[string]any{"code": 1, "msg": "succ", "trade_no": o.TradeNo}
	switch answer {
	case "qrcode":
		out["qrcode"] = "weixin://wxpay/bizpayurl?pr=" + o.TradeNo
	case "urlscheme":
		out["urlscheme"] = "weixin://dl/business/?t=" + o.TradeNo
	default:
		out["payurl"] = s.srv.URL + "/pay/" + o.Type + "/" + o.TradeNo + "/"
	}
	writeJSON(w, out)
}

// api is api.php: act=order answers an order's state to a request with pid and KEY;
// act=refund refunds a paid order.
func (s *Sim) api(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("act") == "refund" {
		s.refund(w, r)
		return
	}
	form := readForm(r)
	answer, refused := s.apiAnswer(form)
	s.record(r, refused)
	writeJSON(w, answer)
}

// refund is api.php?act=refund as the upstream source has it: the parameters from the POST body
// only.
func (s *Sim) refund(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	answer, refused, lose := s.refundAnswer(r.PostForm)
	s.record(r, refused)
	if lose {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	writeJSON(w, answer)
}

func (s *Sim) refundAnswer(form url.Values) (map[string]any, string, bool) {
	fail := func(code int, msg string) (map[string]any, string, bool) {
		return map[string]any{"code": code, "msg": msg}, msg, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refundsOff {
		return fail(-2, "商户未开启订单退款API接口")
	}
	if form.Get("pid") != s.cfg.PID {
		return fail(-3, "商户ID不存在")
	}
	if !s.validKey(form.Get("key")) {
		return fail(-3, "商户密钥错误")
	}
	money, ok := normalMoney(strings.TrimSpace(form.Get("money")))
	if !ok {
		return fail(-1, "金额输入错误")
	}
	var o *Order
	switch {
	case form.Get("trade_no") != "":
		o = s.orders[s.byTradeNo[form.Get("trade_no")]]
	case form.Get("out_trade_no") != "":
		o = s.orders[form.Get("out_trade_no")]
	default:
		return fail(-4, "订单号不能为空")
	}
	if o == nil {
		return fail(-1, "当前订单不存在！")
	}
	if !o.Paid || o.Refunded || o.Frozen {
		return fail(-1, "只支持退款已支付状态的订单")
	}
	if cents(money) > cents(o.Money) {
		return fail(-1, "退款金额不能大于订单金额")
	}
	if s.refusal != "" {
		return fail(-1, "退款失败："+s.refusal)
	}
	if gap := s.refundGap; gap > 0 {
		// The payout follows the check without a lock held across both.
		s.mu.Unlock()
		time.Sleep(gap)
		s.mu.Lock()
	}
	o.Refunded, o.RefundedBy = true, money
	s.payouts[o.OutTradeNo]++
	code := 1
	if s.cfg.RefundCodeZero {
		code = 0
	}
	lose := s.loseRefund > 0
	if lose {
		s.loseRefund--
	}
	return map[string]any{"code": code, "msg": "退款成功！退款金额￥" + money}, "", lose
}

// cents reads an amount normalMoney wrote.
func cents(m string) int64 {
	n, _ := strconv.ParseInt(strings.Replace(m, ".", "", 1), 10, 64)
	return n
}

func (s *Sim) apiAnswer(form url.Values) (map[string]any, string) {
	fail := func(code int, msg string) (map[string]any, string) {
		return map[string]any{"code": code, "msg": msg}, msg
	}
	if form.Get("act") != "order" {
		return fail(-5, "No Act!")
	}
	if form.Get("pid") != s.cfg.PID || !s.validKey(form.Get("key")) {
		return fail(-3, "KEY校验失败")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var o *Order
	switch {
	case form.Get("trade_no") != "":
		o = s.orders[s.byTradeNo[form.Get("trade_no")]]
	case form.Get("out_trade_no") != "":
		o = s.orders[form.Get("out_trade_no")]
	default:
		return fail(-4, "订单号不能为空")
	}
	if o == nil {
		return fail(-1, "订单号不存在")
	}
	status, end := "0", any(nil)
	if o.Paid {
		status, end = "1", o.EndTime.Format("2006-01-02 15:04:05")
	}
	switch {
	case o.Refunded:
		status = "2"
	case o.Frozen:
		status = "3"
	}
	return map[string]any{
		"code": 1, "msg": "查询订单号成功！", "trade_no": o.TradeNo, "out_trade_no": o.OutTradeNo,
		"api_trade_no": "", "type": o.Type, "pid": o.PID, "addtime": o.AddTime.Format("2006-01-02 15:04:05"),
		"endtime": end, "name": o.Name, "money": o.Money, "param": o.Param, "buyer": "", "status": status,
	}, ""
}

// cashier is the page where the buyer pays (mapi.php's payurl).
func (s *Sim) cashier(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	tradeNo := parts[len(parts)-1]
	s.mu.Lock()
	o, ok := s.orders[s.byTradeNo[tradeNo]]
	var snap Order
	if ok {
		snap = *o
	}
	s.mu.Unlock()
	if !ok {
		s.record(r, "订单不存在")
		page(w, `<p class="error">订单不存在</p>`)
		return
	}
	s.record(r, "")
	page(w, cashierBody(snap))
}

// accept checks a signed order and records it, or says why not.
func (s *Sim) accept(form url.Values, via string) (Order, string) {
	if form.Get("pid") != s.cfg.PID {
		return Order{}, "商户不存在！"
	}
	sig := form.Get("sign")
	if sig == "" || sig != Sign(form, s.cfg.Key, s.cfg.AmpKey) {
		return Order{}, "签名校验失败！"
	}
	if st := form.Get("sign_type"); st != "" && st != "MD5" {
		return Order{}, "签名类型不支持！"
	}
	for _, f := range []string{"type", "out_trade_no", "notify_url", "name", "money"} {
		if form.Get(f) == "" {
			return Order{}, f + "不能为空"
		}
	}
	money, ok := normalMoney(form.Get("money"))
	if !ok {
		return Order{}, "金额不合法"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[form.Get("out_trade_no")]; ok {
		if o.Money != money || o.Name != form.Get("name") || o.NotifyURL != form.Get("notify_url") || o.Type != form.Get("type") {
			return Order{}, "该订单号已存在"
		}
		return *o, ""
	}
	s.seq++
	now := s.cfg.Now()
	o := &Order{
		TradeNo:    fmt.Sprintf("%s%05d", now.Format("20060102150405"), s.seq),
		OutTradeNo: form.Get("out_trade_no"), PID: s.cfg.PID, Type: form.Get("type"),
		Name: form.Get("name"), Money: money, NotifyURL: form.Get("notify_url"),
		ReturnURL: form.Get("return_url"), Param: form.Get("param"), ClientIP: form.Get("clientip"),
		Via: via, AddTime: now,
	}
	s.orders[o.OutTradeNo] = o
	s.byTradeNo[o.TradeNo] = o.OutTradeNo
	return *o, ""
}

// normalMoney reads an amount the way the gateways' money column does: digits with at most 2
// decimals, positive, stored (and notified) with exactly 2.
func normalMoney(s string) (string, bool) {
	whole, frac, dotted := strings.Cut(s, ".")
	if whole == "" || len(whole) > 10 || (dotted && (frac == "" || len(frac) > 2)) {
		return "", false
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	frac += strings.Repeat("0", 2-len(frac))
	cents, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || cents <= 0 {
		return "", false
	}
	return fmt.Sprintf("%d.%02d", cents/100, cents%100), true
}

// readForm merges the query and a form body, as PHP's $_REQUEST does.
func readForm(r *http.Request) url.Values {
	_ = r.ParseForm()
	return r.Form
}

func (s *Sim) record(r *http.Request, refused string) {
	_ = r.ParseForm()
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Form: r.PostForm, Refused: refused}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
}

func cashierBody(o Order) string {
	return fmt.Sprintf(`<h1>收银台</h1><p>订单号 <span class="trade_no">%s</span></p><p>商品 %s</p><p>金额 <span class="money">%s</span></p>`,
		html.EscapeString(o.TradeNo), html.EscapeString(o.Name), html.EscapeString(o.Money))
}

func page(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = fmt.Fprintf(w, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>epaysim</title></head><body>%s</body></html>", body)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}
