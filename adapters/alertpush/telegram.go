package alertpush

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"cardshop/domain"
)

// maxTelegramText is sendMessage's limit, in characters.
const maxTelegramText = 4096

// telegramReply is the Bot API's answer to every method.
type telegramReply struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// telegram calls sendMessage (JSON body: chat_id, text) and reads the reply: ok, 429 with
// parameters.retry_after, a refusal (400 chat not found, 401 Unauthorized, 403 the bot was
// removed, 404 no such bot), or a failure to try again (5xx, no JSON).
func (ps *Pusher) telegram(ctx context.Context, c domain.AlertChannel, p domain.AlertPush) error {
	body, err := json.Marshal(map[string]any{"chat_id": c.Target, "text": clipRunes(ps.text(p), maxTelegramText)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		ps.cfg.TelegramURL+"/bot"+c.Secret.Reveal()+"/sendMessage", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("telegram sendMessage: bad request") // the URL holds the token: not quoted
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ps.http.Do(req)
	if err != nil {
		// *url.Error quotes the URL, and with it the token: only the cause is kept.
		return fmt.Errorf("telegram sendMessage: %w: %s", domain.ErrUnavailable, causeOf(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var r telegramReply
	if json.Unmarshal(raw, &r) != nil {
		return fmt.Errorf("telegram sendMessage: %w: answered %s without the Bot API's JSON", domain.ErrUnavailable, resp.Status)
	}
	if r.OK {
		return nil
	}
	reason := fmt.Sprintf("telegram %d: %s", r.ErrorCode, r.Description)
	switch {
	case r.ErrorCode == http.StatusTooManyRequests:
		after := time.Second
		if r.Parameters != nil && r.Parameters.RetryAfter > 0 {
			after = time.Duration(r.Parameters.RetryAfter) * time.Second
		}
		return &domain.RetryAfterError{After: after, Reason: reason}
	case r.ErrorCode >= 400 && r.ErrorCode < 500:
		return &domain.PushRefusedError{Reason: reason}
	}
	return fmt.Errorf("telegram sendMessage: %w: %s", domain.ErrUnavailable, reason)
}
