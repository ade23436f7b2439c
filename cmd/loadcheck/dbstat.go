package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// dbDelta counts MariaDB statements (global Com_* counters) over an interval.
type dbDelta struct{ selects, inserts, updates, deletes int64 }

func (d dbDelta) total() int64 { return d.selects + d.inserts + d.updates + d.deletes }

func (d dbDelta) String() string {
	return fmt.Sprintf("%d (select %d, insert %d, update %d, delete %d)", d.total(), d.selects, d.inserts, d.updates, d.deletes)
}

func (d dbDelta) minus(o dbDelta) dbDelta {
	return dbDelta{d.selects - o.selects, d.inserts - o.inserts, d.updates - o.updates, d.deletes - o.deletes}
}

// readCounters reads the server's statement counters. The query itself counts as one
// SHOW, not a SELECT.
func readCounters(ctx context.Context, db *sql.DB) (dbDelta, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select','Com_insert','Com_update','Com_delete')")
	if err != nil {
		return dbDelta{}, err
	}
	defer rows.Close()
	var d dbDelta
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return d, err
		}
		switch name {
		case "Com_select":
			d.selects = v
		case "Com_insert":
			d.inserts = v
		case "Com_update":
			d.updates = v
		case "Com_delete":
			d.deletes = v
		}
	}
	return d, rows.Err()
}

// dbCounters measures the statements the idle service issues over d (sweeper, relay).
func (e *env) dbCounters(ctx context.Context, d time.Duration) (dbDelta, error) {
	defer quietSampling()() // the sampler's reads of /metrics query the database (sampler.go)
	before, err := readCounters(ctx, e.db)
	if err != nil {
		return dbDelta{}, err
	}
	select {
	case <-ctx.Done():
		return dbDelta{}, ctx.Err()
	case <-time.After(d):
	}
	after, err := readCounters(ctx, e.db)
	if err != nil {
		return dbDelta{}, err
	}
	return after.minus(before), nil
}
