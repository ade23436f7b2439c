package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"cardshop/domain"
)

// MySQL and MariaDB server error numbers the store reacts to.
const (
	erDupEntry          = 1062 // duplicate key
	erLockWaitTimeout   = 1205 // lock wait timeout exceeded
	erLockDeadlock      = 1213 // deadlock found; the server rolled the transaction back
	erNoSuchTable       = 1146
	erDataTooLong       = 1406
	erConCount          = 1040 // too many connections
	erServerShutdown    = 1053
	erOptionPreventsRun = 1290 // --read-only and friends (a fail-over in progress)
	erReadOnlyMode      = 1836
	erConnectionKilled  = 1927 // MariaDB
)

// errCodesLocked voids a transaction whose Allocate found enough sellable codes, but too few
// that other transactions had not locked: Atomically runs it again, waiting for the locks.
var errCodesLocked = errors.New("sellable codes are locked by other transactions")

// retryable reports whether err means the transaction lost a lock conflict and may simply be
// run again: a deadlock (the server has rolled it back), a lock wait timeout, an
// allocation that must wait for locked codes, or an import that lost a code to a concurrent
// one.
func retryable(err error) bool {
	if errors.Is(err, errCodesLocked) || errors.Is(err, errImportRace) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == erLockDeadlock || me.Number == erLockWaitTimeout
	}
	return false
}

// unavailable reports whether err means the database could not do the work for reasons of
// its own — unreachable, overloaded, failing over, or a lock conflict that retries did not
// resolve — so that the caller may try again later.
func unavailable(err error) bool {
	if errors.Is(err, domain.ErrUnavailable) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erLockDeadlock, erLockWaitTimeout, erConCount, erServerShutdown, erOptionPreventsRun,
			erReadOnlyMode, erConnectionKilled:
			return true
		}
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// duplicateKey returns the name of the unique key a duplicate-key error is about, or "".
// The server names it in the message: "Duplicate entry '…' for key 'uk_buyer_idem'" (MySQL 8
// prefixes the table: 'orders.uk_buyer_idem').
func duplicateKey(err error) (key string, ok bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != erDupEntry {
		return "", false
	}
	msg := me.Message
	i := strings.LastIndex(msg, "for key '")
	if i < 0 {
		return "", true
	}
	key = strings.TrimSuffix(msg[i+len("for key '"):], "'")
	if j := strings.LastIndexByte(key, '.'); j >= 0 {
		key = key[j+1:]
	}
	return key, true
}

// wrapErr adds op to err and maps what the domain has a name for: a database that cannot do
// the work wraps domain.ErrUnavailable (the cause stays in the chain), a value too long for
// its column is a domain.ValidationError.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, domain.ErrUnavailable) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if unavailable(err) {
		return fmt.Errorf("%s: %w: %w", op, domain.ErrUnavailable, err)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erDataTooLong {
		field := "value"
		if parts := strings.Split(me.Message, "'"); len(parts) >= 2 {
			field = parts[1]
		}
		return fmt.Errorf("%s: %w: %w", op, domain.Invalid(field, "too long to store"), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
