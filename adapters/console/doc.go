// Package console is the operator console: server-rendered HTML pages under /console on the
// service's own Fiber app, for the people who run the shop from a browser.
//
// It is an adapter like the JSON API: every read and write goes through the application's use
// cases, every action is checked against the operator's role with the admin API's rules, and
// every write is recorded in the audit log with the API's words (webkit.AuditResult). Its
// security model (signed session cookie, CSRF token, origin check, login rate limit, CSP) is
// described in docs/DESIGN.md, "The operator console".
package console
