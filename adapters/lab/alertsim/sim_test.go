package alertsim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/lab/alertsim"
)

const (
	token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	chat  = "-1001234567890"
	key   = "693a91f6-7b1c-4bc4-97a0-0ec2f1fa5aaa"
)

func post(t *testing.T, u, ctype, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(u, ctype, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// TestTelegramAnswersAsTheBotAPI: a message sent (JSON or form), and each documented failure
// with its HTTP status, error_code and description; a throttled request carries retry_after.
func TestTelegramAnswersAsTheBotAPI(t *testing.T) {
	s := alertsim.NewTelegram(alertsim.TelegramConfig{Token: token, Chats: []int64{-1001234567890}, Kicked: []int64{-42}})
	defer s.Close()
	send := s.URL() + "/bot" + token + "/sendMessage"
	status, m := post(t, send, "application/json", `{"chat_id":-1001234567890,"text":"hello"}`)
	if status != 200 || m["ok"] != true || m["result"].(map[string]any)["text"] != "hello" ||
		m["result"].(map[string]any)["message_id"] != float64(1) {
		t.Fatalf("send: %d %v", status, m)
	}
	status, m = post(t, send, "application/x-www-form-urlencoded", url.Values{"chat_id": {chat}, "text": {"form"}}.Encode())
	if status != 200 || m["ok"] != true {
		t.Fatalf("send as a form: %d %v", status, m)
	}
	for _, c := range []struct {
		name, url, body string
		status          int
		desc            string
	}{
		{"no bot token", s.URL() + "/botnot-a-token/sendMessage", `{}`, 404, "Not Found"},
		{"unknown token", s.URL() + "/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDXXX/sendMessage", `{}`, 401, "Unauthorized"},
		{"unknown chat", send, `{"chat_id":7,"text":"x"}`, 400, "Bad Request: chat not found"},
		{"no chat", send, `{"text":"x"}`, 400, "Bad Request: chat_id is empty"},
		{"no text", send, `{"chat_id":` + chat + `}`, 400, "Bad Request: message text is empty"},
		{"too long", send, `{"chat_id":` + chat + `,"text":"` + strings.Repeat("é", 4097) + `"}`, 400, "Bad Request: message is too long"},
		{"kicked", send, `{"chat_id":-42,"text":"x"}`, 403, "Forbidden: bot was kicked from the group chat"},
	} {
		status, m := post(t, c.url, "application/json", c.body)
		if status != c.status || m["ok"] != false || m["error_code"] != float64(c.status) || m["description"] != c.desc {
			t.Errorf("%s: %d %v, want %d %q", c.name, status, m, c.status, c.desc)
		}
	}
	s.Throttle(1, 17)
	status, m = post(t, send, "application/json", `{"chat_id":`+chat+`,"text":"x"}`)
	if status != 429 || m["error_code"] != float64(429) || m["parameters"].(map[string]any)["retry_after"] != float64(17) ||
		m["description"] != "Too Many Requests: retry after 17" {
		t.Fatalf("throttled: %d %v", status, m)
	}
	if n := len(s.Messages()); n != 2 {
		t.Fatalf("%d messages kept, want 2", n)
	}
}

// TestWeComAnswersAsTheRobot: HTTP 200 always; errcode 0, 93000 for a wrong or missing key,
// 40008, 44004, 40058 for bad messages, 45009 past 20 messages in a minute (sliding).
func TestWeComAnswersAsTheRobot(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := alertsim.NewWeCom(alertsim.WeComConfig{Key: key, Now: clock})
	defer s.Close()
	send := s.URL() + "/cgi-bin/webhook/send?key=" + key
	text := func(c string) string {
		b, _ := json.Marshal(map[string]any{"msgtype": "text", "text": map[string]string{"content": c}})
		return string(b)
	}
	for _, c := range []struct {
		name, url, body string
		code            float64
	}{
		{"sent", send, text("hello"), 0},
		{"markdown", send, `{"msgtype":"markdown","markdown":{"content":"**hi**"}}`, 0},
		{"wrong key", s.URL() + "/cgi-bin/webhook/send?key=nope", text("x"), 93000},
		{"no key", s.URL() + "/cgi-bin/webhook/send", text("x"), 93000},
		{"unknown type", send, `{"msgtype":"video"}`, 40008},
		{"empty", send, text("  "), 44004},
		{"too long", send, text(strings.Repeat("长", 683)), 40058}, // 2049 bytes
	} {
		status, m := post(t, c.url, "application/json", c.body)
		if status != 200 || m["errcode"] != c.code {
			t.Errorf("%s: %d %v, want errcode %v", c.name, status, m, c.code)
		}
	}
	for i := 2; i < alertsim.WeComPerMinute; i++ {
		if _, m := post(t, send, "application/json", text("n")); m["errcode"] != float64(0) {
			t.Fatalf("message %d: %v", i+1, m)
		}
	}
	if _, m := post(t, send, "application/json", text("21st")); m["errcode"] != float64(45009) || m["errmsg"] != "api freq out of limit" {
		t.Fatalf("21st message in a minute: %v", m)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if _, m := post(t, send, "application/json", text("next minute")); m["errcode"] != float64(0) {
		t.Fatalf("a minute later: %v", m)
	}
	s.Throttle(1)
	if _, m := post(t, send, "application/json", text("x")); m["errcode"] != float64(45009) {
		t.Fatalf("throttled: %v", m)
	}
	if n := len(s.Messages()); n != alertsim.WeComPerMinute+1 {
		t.Fatalf("%d messages kept, want %d", n, alertsim.WeComPerMinute+1)
	}
}

// TestOutages: a 502 page from the front, or no answer until the client gives up.
func TestOutages(t *testing.T) {
	s := alertsim.NewWeCom(alertsim.WeComConfig{Key: key})
	defer s.Close()
	s.SetOutage(alertsim.Error5xx)
	resp, err := http.Post(s.URL()+"/cgi-bin/webhook/send?key="+key, "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != 502 {
		t.Fatalf("5xx outage: %v %v", resp, err)
	}
	resp.Body.Close()
	s.SetOutage(alertsim.Hang)
	c := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := c.Post(s.URL()+"/cgi-bin/webhook/send?key="+key, "application/json", strings.NewReader(`{}`)); err == nil {
		t.Fatal("a hanging simulator answered")
	}
}
