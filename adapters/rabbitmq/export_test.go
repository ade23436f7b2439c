package rabbitmq

import "time"

// Test-only access to the internals the tests check.

// BucketFor exposes bucketFor.
var BucketFor = bucketFor

// Ladder exposes ladder.
var Ladder = ladder

// DueHeader is the header carrying a scheduled message's due time.
const DueHeader = dueHeader

// Queues lists every queue the broker declared.
func (b *Broker) Queues() []string { return b.topo.queues() }

// Exchanges lists every exchange the broker declared.
func (b *Broker) Exchanges() []string { return b.topo.exchanges() }

// OrderTimeoutsQueue names the queue Consume reads.
func (b *Broker) OrderTimeoutsQueue() string { return b.topo.orderTimeouts }

// DeliveredQueue names the notifiers' queue.
func (b *Broker) DeliveredQueue() string { return b.topo.delivered }

// Buckets lists the delay buckets.
func (b *Broker) Buckets() []time.Duration { return b.topo.buckets }

// ConnectionName is the client-provided name of the broker's connections.
func (b *Broker) ConnectionName() string { return b.connName }

// CurrentConn returns the live connection (nil while reconnecting), as an opaque value.
func (b *Broker) CurrentConn() any {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil
	}
	return b.conn
}
