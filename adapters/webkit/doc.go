// Package webkit holds what cardshop's two web doors, the JSON API (adapters/httpapi) and the
// operator console (adapters/console), share, so that neither depends on the other: the error
// table (each error's status, stable code and safe message), the audit log's wording of a
// write (result, target, secret fields, an import's counts), the recording of refused
// operator authentications (AuthFailures) with its rate-limit port (Limiter), readiness
// checks, the request's one body reader, and the alert list's query.
package webkit
