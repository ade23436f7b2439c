package alertpush

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"cardshop/domain"
)

// maxWeComText is a text message's limit, in bytes.
const maxWeComText = 2048

// The robot's error codes cardshop tells apart.
const (
	weComRateLimit  = 45009 // api freq out of limit: 20 messages a minute per robot
	weComInvalidKey = 93000 // invalid webhook url: no robot has that key
)

// weCom posts a text message to the robot's webhook (key in the query) and reads
// {"errcode","errmsg"}: 0 sent, 45009 rate limited (wait out the minute), any other code a
// refusal (93000 no such robot, 400xx a message it will never take), a non-JSON answer or a
// 5xx a failure to try again.
func (ps *Pusher) weCom(ctx context.Context, c domain.AlertChannel, p domain.AlertPush) error {
	body, err := json.Marshal(map[string]any{"msgtype": "text",
		"text": map[string]string{"content": clipBytes(ps.text(p), maxWeComText)}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		ps.cfg.WeComURL+"/cgi-bin/webhook/send?key="+url.QueryEscape(c.Secret.Reveal()), bytes.NewReader(body))
	if err != nil {
		return errors.New("wecom webhook: bad request") // the URL holds the key: not quoted
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ps.http.Do(req)
	if err != nil {
		return fmt.Errorf("wecom webhook: %w: %s", domain.ErrUnavailable, causeOf(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var r struct {
		ErrCode *int   `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &r) != nil || r.ErrCode == nil {
		return fmt.Errorf("wecom webhook: %w: answered %s without the robot's JSON", domain.ErrUnavailable, resp.Status)
	}
	reason := fmt.Sprintf("wecom %d: %s", *r.ErrCode, r.ErrMsg)
	switch *r.ErrCode {
	case 0:
		return nil
	case weComRateLimit:
		return &domain.RetryAfterError{After: weComWindow, Reason: reason}
	}
	return &domain.PushRefusedError{Reason: reason}
}

// causeOf is a transport error without the request's URL (which holds a token or a key).
func causeOf(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// jsonPush is the push as the webhook's event data.
func jsonPush(p domain.AlertPush) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode alert push: %w", err)
	}
	return b, nil
}
