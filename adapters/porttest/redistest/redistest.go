// Package redistest gives the integration tests of the Redis adapters (the gate, the rate
// limiter) their clients: a standalone one on a database of their own and a Cluster one, each
// stopping the test as porttest.RequireService says when Redis cannot be reached (skipped
// locally, failed with CI=true); and a primary, replica and Sentinel of a test's own
// (StartFailover) for the failover tests, and an empty Redis of a test's own (StartEmpty).
//
// It imports go-redis, porttest and the standard library.
package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/porttest"
)

// Standalone returns a new client of the standalone Redis (porttest.RedisAddr) on database db,
// closed with the test. Packages use different databases so their tests never meet.
func Standalone(t testing.TB, db int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: porttest.RedisAddr, DB: db})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	porttest.RequireService(t, "Redis "+porttest.RedisAddr, c.Ping(ctx).Err())
	return c
}

// Cluster returns a new client of the Redis Cluster (porttest.RedisCluster), closed with the
// test, after checking that every master answers.
func Cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(porttest.RedisCluster, ",")})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
	porttest.RequireService(t, "Redis Cluster "+porttest.RedisCluster, err)
	return c
}
