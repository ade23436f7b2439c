// Package storefront is the shop buyers use: a driving adapter beside the JSON API and the
// operator console, served at "/". Its pages are rendered on the server (html/template) in
// Simplified Chinese or English from the message catalogues of adapters/i18n: the catalogue
// and product pages from the public catalogue snapshot (no database per request), guest
// checkout with an e-mail address, paying (a redirect, or a QR code drawn here), the order
// page reachable only with the order's access secret, and the order lookup.
//
// Every page carries a strict Content-Security-Policy (no inline script or style: the few
// scripts are small embedded files), every POST a CSRF token bound to a cookie, and nothing
// shown is unescaped. Codes appear on the order page and its TXT download only, never in a
// URL or a log line.
package storefront
