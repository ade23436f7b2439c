package alipaysim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The API methods the gateway serves.
const (
	apiPrecreate   = "alipay.trade.precreate"
	apiPagePay     = "alipay.trade.page.pay"
	apiWapPay      = "alipay.trade.wap.pay"
	apiQuery       = "alipay.trade.query"
	apiClose       = "alipay.trade.close"
	apiRefund      = "alipay.trade.refund"
	apiRefundQuery = "alipay.trade.fastpay.refund.query"
)

// maxFen is Alipay's largest amount: 100000000.00 yuan.
const maxFen = 100_000_000_00

// refusal is an error answer: code, msg, sub_code, sub_msg.
type refusal struct{ code, msg, subCode, subMsg string }

func business(subCode, subMsg string) *refusal {
	return &refusal{code: "40004", msg: "Business Failed", subCode: subCode, subMsg: subMsg}
}

func invalid(subCode, subMsg string) *refusal {
	return &refusal{code: "40002", msg: "Invalid Arguments", subCode: subCode, subMsg: subMsg}
}

// down answers 502 to everything while the gateway is down.
func (s *Sim) down(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		out := s.outage
		s.mu.Unlock()
		if out {
			_ = r.ParseForm()
			s.record(Request{HTTPMethod: r.Method, Method: r.Form.Get("method"), Params: r.Form, Refused: "outage"})
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// gateway is gateway.do: the common parameters and the signature are checked, then the
// method runs. page.pay and wap.pay answer HTML (the buyer's browser); the others JSON.
func (s *Sim) gateway(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	form := r.Form
	method := form.Get("method")
	req := Request{HTTPMethod: r.Method, Method: method, Params: form}
	biz, ref := s.check(form)
	req.Biz = biz
	page := method == apiPagePay || method == apiWapPay
	if ref == nil {
		switch method {
		case apiPagePay, apiWapPay:
			var t Trade
			t, ref = s.cashierTrade(method, form, biz)
			if ref == nil {
				s.record(req)
				writePage(w, cashierBody(t))
				return
			}
		case apiRefund:
			s.refund(w, req, biz)
			return
		default:
			var obj map[string]any
			switch method {
			case apiPrecreate:
				obj, ref = s.precreate(form, biz)
			case apiQuery:
				obj, ref = s.query(biz)
			case apiClose:
				obj, ref = s.closeTrade(biz)
			case apiRefundQuery:
				obj, ref = s.refundQuery(biz)
			}
			s.api(w, req, obj, ref)
			return
		}
	}
	req.Refused = ref.subCode
	s.record(req)
	if page {
		writePage(w, `<p class="error">`+html.EscapeString(ref.subCode+": "+ref.subMsg)+`</p>`)
		return
	}
	s.write(w, method, errorObject(ref), false)
}

// check verifies the common parameters and the merchant's signature and reads biz_content.
// Its refusals are not signed.
func (s *Sim) check(form map[string][]string) (map[string]any, *refusal) {
	for k, vs := range form {
		if len(vs) != 1 {
			return nil, invalid("isv.invalid-parameter", "参数重复: "+k)
		}
	}
	get := func(k string) string {
		if vs := form[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	switch {
	case get("app_id") == "":
		return nil, &refusal{"40001", "Missing Required Arguments", "isv.missing-app-id", "缺少AppID参数"}
	case get("app_id") != s.cfg.AppID:
		return nil, invalid("isv.invalid-app-id", "无效的AppID参数")
	case get("method") == "":
		return nil, &refusal{"40001", "Missing Required Arguments", "isv.missing-method", "缺少方法名参数"}
	}
	switch get("method") {
	case apiPrecreate, apiPagePay, apiWapPay, apiQuery, apiClose, apiRefund, apiRefundQuery:
	default:
		return nil, invalid("isv.invalid-method", "不存在的方法名")
	}
	if f := get("format"); f != "" && !strings.EqualFold(f, "JSON") {
		return nil, invalid("isv.invalid-format", "无效的数据格式")
	}
	if !strings.EqualFold(get("charset"), "utf-8") {
		return nil, invalid("isv.invalid-charset", "字符集错误")
	}
	if get("version") != "1.0" {
		return nil, invalid("isv.invalid-version", "版本号错误")
	}
	if _, err := time.ParseInLocation(TimeLayout, get("timestamp"), ChinaTime); err != nil {
		return nil, invalid("isv.invalid-timestamp", "非法的时间戳参数")
	}
	if get("sign_type") != "RSA2" {
		return nil, invalid("isv.invalid-signature-type", "无效的签名类型")
	}
	if get("sign") == "" {
		return nil, &refusal{"40001", "Missing Required Arguments", "isv.missing-signature", "缺少签名参数"}
	}
	if !verify(s.cfg.MerchantKey, []byte(SigningString(form, false)), get("sign")) {
		return nil, invalid("isv.invalid-signature", "验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配")
	}
	dec := json.NewDecoder(strings.NewReader(get("biz_content")))
	dec.UseNumber()
	var biz map[string]any
	if err := dec.Decode(&biz); err != nil || biz == nil {
		return nil, invalid("isv.invalid-parameter", "biz_content 不是 JSON 对象")
	}
	return biz, nil
}

// str reads a business parameter as text (a string or a number).
func str(biz map[string]any, k string) string {
	switch v := biz[k].(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return ""
}

// fen reads an amount: digits with at most 2 decimals, 0.01 to 100000000.00.
func fen(s string) (int64, bool) {
	whole, frac, dotted := strings.Cut(s, ".")
	if whole == "" || len(whole) > 9 || (dotted && (frac == "" || len(frac) > 2)) {
		return 0, false
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	frac += strings.Repeat("0", 2-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || n <= 0 || n > maxFen {
		return 0, false
	}
	return n, true
}

// newTrade checks a creation's business parameters and records the trade, or finds the same
// one again.
func (s *Sim) newTrade(method string, form map[string][]string, biz map[string]any) (Trade, *refusal) {
	no, subject := str(biz, "out_trade_no"), str(biz, "subject")
	if no == "" || len(no) > 64 || subject == "" {
		return Trade{}, &refusal{"40001", "Missing Required Arguments", "isv.missing-biz-param", "缺少业务参数"}
	}
	total, ok := fen(str(biz, "total_amount"))
	if !ok {
		return Trade{}, invalid("isv.invalid-parameter", "total_amount 不合法")
	}
	var expire time.Time
	if te := str(biz, "time_expire"); te != "" {
		t, err := time.ParseInLocation(TimeLayout, te, ChinaTime)
		if err != nil {
			return Trade{}, invalid("isv.invalid-parameter", "time_expire 格式错误")
		}
		if !s.cfg.Now().Before(t) {
			return Trade{}, business("ACQ.INVALID_PARAMETER", "订单已过期")
		}
		expire = t
	}
	first := func(k string) string {
		if vs := form[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.trades[no]; ok {
		switch {
		case t.Status == "TRADE_SUCCESS" || !t.GmtPayment.IsZero():
			return Trade{}, business("ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
		case t.Status == "TRADE_CLOSED":
			return Trade{}, business("ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
		case t.Total != total || t.Subject != subject:
			return Trade{}, business("ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
		}
		if err := s.expireLocked(t); err != nil {
			return Trade{}, business("ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
		}
		t.NotifyURL, t.ReturnURL, t.TimeExpire = first("notify_url"), first("return_url"), expire
		return *t, nil
	}
	t := &Trade{OutTradeNo: no, TradeNo: s.tradeNoLocked(), Method: method, Subject: subject, Total: total,
		NotifyURL: first("notify_url"), ReturnURL: first("return_url"), TimeExpire: expire, Status: "WAIT_BUYER_PAY"}
	t.QRCode = "https://qr.alipay.com/bax0" + t.TradeNo[len(t.TradeNo)-12:]
	s.trades[no] = t
	return *t, nil
}

func (s *Sim) cashierTrade(method string, form map[string][]string, biz map[string]any) (Trade, *refusal) {
	want := "FAST_INSTANT_TRADE_PAY"
	if method == apiWapPay {
		want = "QUICK_WAP_WAY"
	}
	if pc := str(biz, "product_code"); pc != want {
		return Trade{}, invalid("isv.invalid-parameter", "product_code 应为 "+want)
	}
	t, ref := s.newTrade(method, form, biz)
	if ref != nil {
		return Trade{}, ref
	}
	if err := s.Scan(t.OutTradeNo); err != nil {
		return Trade{}, business("ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
	}
	return t, nil
}

func (s *Sim) precreate(form map[string][]string, biz map[string]any) (map[string]any, *refusal) {
	t, ref := s.newTrade(apiPrecreate, form, biz)
	if ref != nil {
		return nil, ref
	}
	return map[string]any{"out_trade_no": t.OutTradeNo, "qr_code": t.QRCode}, nil
}

// lookupLocked finds an existing trade by trade_no or out_trade_no.
func (s *Sim) lookupLocked(biz map[string]any) *Trade {
	if tn := str(biz, "trade_no"); tn != "" {
		for _, t := range s.trades {
			if t.TradeNo == tn && t.Exists {
				return t
			}
		}
		return nil
	}
	if t, ok := s.trades[str(biz, "out_trade_no")]; ok && t.Exists {
		return t
	}
	return nil
}

func (s *Sim) query(biz map[string]any) (map[string]any, *refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.lookupLocked(biz)
	if t == nil {
		return nil, business("ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	_ = s.expireLocked(t)
	out := map[string]any{
		"trade_no": t.TradeNo, "out_trade_no": t.OutTradeNo, "buyer_logon_id": "159****5620",
		"trade_status": t.Status, "total_amount": yuan(t.Total), "buyer_pay_amount": "0.00",
		"point_amount": "0.00", "invoice_amount": "0.00", "receipt_amount": "0.00", "buyer_user_id": "2088102177846880",
	}
	if !t.GmtPayment.IsZero() {
		for _, k := range []string{"buyer_pay_amount", "invoice_amount", "receipt_amount"} {
			out[k] = yuan(t.Total)
		}
		out["send_pay_date"] = t.GmtPayment.In(ChinaTime).Format(TimeLayout)
	}
	return out, nil
}

func (s *Sim) closeTrade(biz map[string]any) (map[string]any, *refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.lookupLocked(biz)
	if t == nil {
		return nil, business("ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	_ = s.expireLocked(t)
	if t.Status != "WAIT_BUYER_PAY" {
		return nil, business("ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
	}
	t.Status, t.GmtClose = "TRADE_CLOSED", s.cfg.Now()
	return map[string]any{"trade_no": t.TradeNo, "out_trade_no": t.OutTradeNo}, nil
}

// refund is alipay.trade.refund, idempotent by out_request_no.
func (s *Sim) refund(w http.ResponseWriter, req Request, biz map[string]any) {
	obj, ref, payout, lose := s.refundLocked(biz)
	req.Payout = payout
	if lose {
		req.Refused = "answer lost"
		s.record(req)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	}
	s.api(w, req, obj, ref)
}

func (s *Sim) refundLocked(biz map[string]any) (map[string]any, *refusal, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refundOutage {
		return nil, business("ACQ.SYSTEM_ERROR", "系统错误"), false, false
	}
	if s.refuseCode != "" {
		return nil, business(s.refuseCode, s.refuseMsg), false, false
	}
	amount, ok := fen(str(biz, "refund_amount"))
	if !ok {
		return nil, invalid("isv.invalid-parameter", "refund_amount 不合法"), false, false
	}
	t := s.lookupLocked(biz)
	if t == nil {
		return nil, business("ACQ.TRADE_NOT_EXIST", "交易不存在"), false, false
	}
	reqNo := str(biz, "out_request_no")
	if reqNo == "" {
		reqNo = t.OutTradeNo
	}
	answer := func(change string) map[string]any {
		return map[string]any{"trade_no": t.TradeNo, "out_trade_no": t.OutTradeNo, "buyer_logon_id": "159****5620",
			"fund_change": change, "refund_fee": yuan(t.Refunded), "gmt_refund_pay": s.cfg.Now().In(ChinaTime).Format(TimeLayout),
			"buyer_user_id": "2088102177846880", "send_back_fee": yuan(amount)}
	}
	for _, r := range t.Refunds {
		if r.OutRequestNo == reqNo {
			if r.Amount != amount {
				return nil, business("ACQ.DISCORDANT_REPEAT_REQUEST", "比对失败，请确认重复请求的参数一致"), false, false
			}
			return answer("N"), nil, false, false
		}
	}
	if t.Status != "TRADE_SUCCESS" {
		return nil, business("ACQ.TRADE_STATUS_ERROR", "交易状态不合法"), false, false
	}
	if amount > t.Total-t.Refunded {
		return nil, business("ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", "退款金额超限"), false, false
	}
	now := s.cfg.Now()
	t.Refunded += amount
	t.Refunds = append(t.Refunds, Refund{OutRequestNo: reqNo, Amount: amount, Reason: str(biz, "refund_reason"), At: now, NotifyID: s.notifyIDLocked()})
	if t.Refunded == t.Total {
		t.Status, t.GmtClose = "TRADE_CLOSED", now
	}
	s.payouts++
	lose := s.loseRefunds > 0
	if lose {
		s.loseRefunds--
	}
	return answer("Y"), nil, true, lose
}

func (s *Sim) refundQuery(biz map[string]any) (map[string]any, *refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.lookupLocked(biz)
	if t == nil {
		return nil, business("ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	reqNo := str(biz, "out_request_no")
	for _, r := range t.Refunds {
		if r.OutRequestNo == reqNo {
			return map[string]any{"trade_no": t.TradeNo, "out_trade_no": t.OutTradeNo, "out_request_no": reqNo,
				"total_amount": yuan(t.Total), "refund_amount": yuan(r.Amount), "refund_status": "REFUND_SUCCESS",
				"gmt_refund_pay": r.At.In(ChinaTime).Format(TimeLayout)}, nil
		}
	}
	// Alipay answers success with no refund data when there is no such refund.
	return map[string]any{}, nil
}

// api writes a JSON answer, signed: the object on success, the refusal otherwise.
func (s *Sim) api(w http.ResponseWriter, req Request, obj map[string]any, ref *refusal) {
	if ref != nil {
		req.Refused = ref.subCode
		s.record(req)
		s.write(w, req.Method, errorObject(ref), true)
		return
	}
	s.record(req)
	all := map[string]any{"code": "10000", "msg": "Success"}
	for k, v := range obj {
		all[k] = v
	}
	s.write(w, req.Method, all, true)
}

func errorObject(r *refusal) map[string]any {
	return map[string]any{"code": r.code, "msg": r.msg, "sub_code": r.subCode, "sub_msg": r.subMsg}
}

// write answers {"<method>_response": obj, "sign": …}: sign is RSA2 with Alipay's key over the
// exact bytes of the object as written.
func (s *Sim) write(w http.ResponseWriter, method string, obj map[string]any, signed bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(obj)
	raw := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	field := "error_response"
	if method != "" {
		field = strings.ReplaceAll(method, ".", "_") + "_response"
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, `{"%s":%s`, field, raw)
	if signed {
		fmt.Fprintf(&out, `,"sign":"%s"`, Sign(s.cfg.AlipayKey, raw))
	}
	out.WriteString("}")
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_, _ = w.Write(out.Bytes())
}

// cashier shows a trade's cashier page again (/cashier/<out_trade_no>).
func (s *Sim) cashier(w http.ResponseWriter, r *http.Request) {
	t, ok := s.Trade(strings.TrimPrefix(r.URL.Path, "/cashier/"))
	if !ok {
		writePage(w, `<p class="error">交易不存在</p>`)
		return
	}
	writePage(w, cashierBody(t))
}

func (s *Sim) record(r Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

func cashierBody(t Trade) string {
	return fmt.Sprintf(`<h1>支付宝收银台</h1><p>订单号 <span class="out_trade_no">%s</span></p><p>%s</p><p>金额 <span class="total_amount">%s</span></p>`,
		html.EscapeString(t.OutTradeNo), html.EscapeString(t.Subject), yuan(t.Total))
}

func writePage(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = fmt.Fprintf(w, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>alipaysim</title></head><body>%s</body></html>", body)
}
