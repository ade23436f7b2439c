package rabbitmq_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: Close must stop the
// supervisor, the consumer and everything amqp091-go started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
