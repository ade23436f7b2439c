// Package alertsim simulates the two chat services cardshop pushes alerts to, written from
// their public documentation, for the alert channels' tests:
//
// Telegram's Bot API (Telegram): POST /bot<token>/sendMessage with chat_id and text as JSON,
// a form or the query string. Every reply is JSON {"ok": …}: a sent message is
// {"ok":true,"result":{message_id, from, chat, date, text}}; a failure is
// {"ok":false,"error_code":N,"description":"…"} with N as the HTTP status too: 404 "Not Found"
// for a path that is no bot token, 401 "Unauthorized" for a well-formed token the service
// does not know, 400 "Bad Request: chat not found" / "…: chat_id is empty" / "…: message text
// is empty" / "…: message is too long" (over 4096 characters), 403 "Forbidden: bot was kicked
// from the group chat" for a chat that removed the bot, and 429 "Too Many Requests: retry
// after N" with "parameters":{"retry_after":N}.
//
// WeCom's group robot (企业微信群机器人, WeCom): POST /cgi-bin/webhook/send?key=KEY with
// {"msgtype":"text","text":{"content":…}} or {"msgtype":"markdown","markdown":{"content":…}}.
// The HTTP status is 200 whatever happens; the body says {"errcode":0,"errmsg":"ok"}, or
// errcode 93000 "invalid webhook url" for an unknown or missing key, 40008 "invalid message
// type", 44004 "empty content", 40058 for a text over 2048 bytes (markdown: 4096; the
// documentation states the limits, the code is the service's generic invalid-parameter one),
// and 45009 "api freq out of limit" past 20 messages a minute per robot (the documented
// limit, a sliding minute here; the reply carries no retry time).
//
// Both have outage modes (a 502 from the front, or no answer at all) and a switch that makes
// the next N requests rate-limited. It imports the standard library only.
package alertsim
