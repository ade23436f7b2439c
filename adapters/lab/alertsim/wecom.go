package alertsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// WeCom's documented limits.
const (
	MaxWeComText     = 2048 // bytes of a text message's content
	MaxWeComMarkdown = 4096 // bytes of a markdown message's content
	WeComPerMinute   = 20   // messages per robot per minute
)

// WeComConfig sets up a WeCom robot simulator.
type WeComConfig struct {
	Key string // the one robot key the service knows
	// Now is the service's clock (the per-minute limit); nil: time.Now.
	Now func() time.Time
}

// WeComMessage is a message the simulator accepted.
type WeComMessage struct {
	Type    string // "text" or "markdown"
	Content string
}

// WeCom is a simulated group robot webhook.
type WeCom struct {
	*server
	cfg  WeComConfig
	mu   sync.Mutex
	sent []WeComMessage
	at   []time.Time // when each accepted message came, for the per-minute limit
}

// NewWeCom starts a simulator; Close it when done.
func NewWeCom(cfg WeComConfig) *WeCom {
	c := &WeCom{cfg: cfg}
	c.server = newServer(cfg.Now, c.handle)
	return c
}

// Throttle makes the next n requests answer 45009.
func (c *WeCom) Throttle(n int) {
	c.server.mu.Lock()
	c.server.throttle = n
	c.server.mu.Unlock()
}

// Messages returns the messages accepted so far, in order.
func (c *WeCom) Messages() []WeComMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]WeComMessage(nil), c.sent...)
}

func reply(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, http.StatusOK, map[string]any{"errcode": code, "errmsg": msg})
}

func (c *WeCom) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/cgi-bin/webhook/send" || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" || key != c.cfg.Key {
		// As the service words it: a request id and where to look the code up, never the key.
		reply(w, 93000, fmt.Sprintf("invalid webhook url, hint: [%d_sim], more info at https://open.work.weixin.qq.com/devtool/query?e=93000",
			c.now().Unix()))
		return
	}
	if limited, _ := c.takeThrottle(); limited {
		reply(w, 45009, "api freq out of limit")
		return
	}
	var body struct {
		MsgType  string                    `json:"msgtype"`
		Text     *struct{ Content string } `json:"text"`
		Markdown *struct{ Content string } `json:"markdown"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&body); err != nil {
		reply(w, 40008, "invalid message type")
		return
	}
	var content string
	limit := MaxWeComText
	switch {
	case body.MsgType == "text" && body.Text != nil:
		content = body.Text.Content
	case body.MsgType == "markdown" && body.Markdown != nil:
		content, limit = body.Markdown.Content, MaxWeComMarkdown
	default:
		reply(w, 40008, "invalid message type")
		return
	}
	if strings.TrimSpace(content) == "" {
		reply(w, 44004, "empty content")
		return
	}
	if len(content) > limit {
		reply(w, 40058, "invalid parameter: content exceed max length")
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.at {
		if now.Sub(t) < time.Minute {
			n++
		}
	}
	if n >= WeComPerMinute {
		reply(w, 45009, "api freq out of limit")
		return
	}
	c.at = append(c.at, now)
	c.sent = append(c.sent, WeComMessage{Type: body.MsgType, Content: content})
	reply(w, 0, "ok")
}
