package redistest

import (
	"os/exec"
	"testing"

	"cardshop/adapters/porttest"
)

// StartEmpty starts a Redis of the test's own (its own port and directory, nothing on disk),
// empty, killed when the test ends, and returns its address: a test that needs a fresh Redis
// (a restore, a lost Redis) never flushes the shared one. It stops the test as
// porttest.RequireService says when redis-server is missing.
func StartEmpty(t testing.TB) string {
	t.Helper()
	_, err := exec.LookPath("redis-server")
	porttest.RequireService(t, "redis-server (for a Redis of the test's own)", err)
	dir := t.TempDir()
	f := &Failover{procs: map[string]*exec.Cmd{}, dir: dir}
	addr := freePort(t)
	f.start(t, dir, "redis", "--port", port(addr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	waitPing(t, addr)
	return addr
}
