package alertsim

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxTelegramText is the longest message text sendMessage takes, in characters.
const MaxTelegramText = 4096

// TelegramConfig sets up a Telegram simulator.
type TelegramConfig struct {
	Token string  // the one bot token the service knows, "123456:ABC…"
	Chats []int64 // the chats the bot is in; a message to any other is "chat not found"
	// Kicked are chats that removed the bot: 403.
	Kicked []int64
	// Now is the service's clock (the message's date); nil: time.Now.
	Now func() time.Time
}

// TelegramMessage is a message the simulator accepted.
type TelegramMessage struct {
	ID   int64
	Chat int64
	Text string
}

// Telegram is a simulated Bot API server.
type Telegram struct {
	*server
	cfg    TelegramConfig
	botID  int64
	mu     sync.Mutex
	sent   []TelegramMessage
	nextID int64
}

// tokenShape is what a bot token looks like; another path segment is "Not Found".
var tokenShape = regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]+$`)

// NewTelegram starts a simulator; Close it when done.
func NewTelegram(cfg TelegramConfig) *Telegram {
	t := &Telegram{cfg: cfg}
	t.botID, _ = strconv.ParseInt(strings.SplitN(cfg.Token, ":", 2)[0], 10, 64)
	t.server = newServer(cfg.Now, t.handle)
	return t
}

// Throttle makes the next n requests answer 429 with retry_after seconds.
func (t *Telegram) Throttle(n, retryAfter int) {
	t.server.mu.Lock()
	t.server.throttle, t.server.retry = n, retryAfter
	t.server.mu.Unlock()
}

// Messages returns the messages accepted so far, in order.
func (t *Telegram) Messages() []TelegramMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TelegramMessage(nil), t.sent...)
}

func (t *Telegram) fail(w http.ResponseWriter, code int, desc string, params map[string]any) {
	body := map[string]any{"ok": false, "error_code": code, "description": desc}
	if params != nil {
		body["parameters"] = params
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (t *Telegram) handle(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || !tokenShape.MatchString(token) {
		t.fail(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	if token != t.cfg.Token {
		t.fail(w, http.StatusUnauthorized, "Unauthorized", nil)
		return
	}
	if method != "sendMessage" {
		t.fail(w, http.StatusNotFound, "Not Found: method not found", nil)
		return
	}
	if limited, after := t.takeThrottle(); limited {
		t.fail(w, http.StatusTooManyRequests, fmt.Sprintf("Too Many Requests: retry after %d", after),
			map[string]any{"retry_after": after})
		return
	}
	chat, text, err := telegramParams(r)
	if err != nil {
		t.fail(w, http.StatusBadRequest, "Bad Request: "+err.Error(), nil)
		return
	}
	switch {
	case chat == "":
		t.fail(w, http.StatusBadRequest, "Bad Request: chat_id is empty", nil)
		return
	case strings.TrimSpace(text) == "":
		t.fail(w, http.StatusBadRequest, "Bad Request: message text is empty", nil)
		return
	case utf8.RuneCountInString(text) > MaxTelegramText:
		t.fail(w, http.StatusBadRequest, "Bad Request: message is too long", nil)
		return
	}
	id, err := strconv.ParseInt(chat, 10, 64)
	if err != nil || !contains(t.cfg.Chats, id) && !contains(t.cfg.Kicked, id) {
		t.fail(w, http.StatusBadRequest, "Bad Request: chat not found", nil)
		return
	}
	if contains(t.cfg.Kicked, id) {
		t.fail(w, http.StatusForbidden, "Forbidden: bot was kicked from the group chat", nil)
		return
	}
	t.mu.Lock()
	t.nextID++
	m := TelegramMessage{ID: t.nextID, Chat: id, Text: text}
	t.sent = append(t.sent, m)
	t.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": map[string]any{
		"message_id": m.ID,
		"from":       map[string]any{"id": t.botID, "is_bot": true, "first_name": "cardshop alerts", "username": "cardshop_sim_bot"},
		"chat":       map[string]any{"id": id, "title": "shop alerts", "type": "group"},
		"date":       t.now().Unix(),
		"text":       text,
	}})
}

func contains(xs []int64, x int64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// telegramParams reads chat_id and text from the query string, a form or a JSON body, as the
// Bot API accepts them.
func telegramParams(r *http.Request) (chat, text string, err error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var body map[string]any
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&body); err != nil {
			return "", "", fmt.Errorf("can't parse JSON object")
		}
		switch v := body["chat_id"].(type) {
		case string:
			chat = v
		case float64:
			chat = strconv.FormatInt(int64(v), 10)
		}
		text, _ = body["text"].(string)
		return chat, text, nil
	}
	if err := r.ParseForm(); err != nil {
		return "", "", fmt.Errorf("can't parse request")
	}
	return r.Form.Get("chat_id"), r.Form.Get("text"), nil
}
