package porttest

import (
	"os"
	"testing"
)

// RequireService stops a test that needs an outside service (MariaDB, Redis, RabbitMQ) when
// err says it cannot be reached: with CI=true the test fails, so a CI run can never pass by
// skipping its integration suites; elsewhere it is skipped with the reason.
func RequireService(t testing.TB, name string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is unreachable and CI=true, so this fails instead of skipping: %v", name, err)
	}
	t.Skipf("%s is unreachable (run `make services`, or set CI=true to fail instead): %v", name, err)
}

// Env returns the environment variable name, or def when it is unset.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// The addresses the integration tests use, each overridable by its environment variable.
var (
	MySQLDSN     = Env("TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/")
	RedisAddr    = Env("TEST_REDIS_ADDR", "127.0.0.1:6379")
	RedisCluster = Env("TEST_REDIS_CLUSTER", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")
	AMQPURL      = Env("TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
)
