package rabbitmq

import (
	"slices"
	"time"
)

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

// TimeoutMessages counts the timeout messages the broker has had confirmed: batches of
// ScheduleClose and the consumer's re-parked early arrivals.
func (b *Broker) TimeoutMessages() int64 { return b.timeoutMessages.Load() }

// SetLinger changes how long a ScheduleClose batch waits for more orders (call it before the
// first ScheduleClose of the batch it should apply to).
func (b *Broker) SetLinger(d time.Duration) {
	b.batch.mu.Lock()
	defer b.batch.mu.Unlock()
	b.batch.linger = d
}

// Queued counts the ScheduleClose calls waiting for their batch to be flushed.
func (b *Broker) Queued() int {
	b.batch.mu.Lock()
	defer b.batch.mu.Unlock()
	return len(b.batch.items)
}

// EncodeOrders and DecodeOrders expose a timeout message's body format.
var (
	EncodeOrders = encodeOrders
	DecodeOrders = decodeOrders
)

// GroupSizes sorts dues and reports the sizes of the groups a flush at now would publish as
// one message each.
func GroupSizes(buckets []time.Duration, dues []time.Time, now time.Time) []int {
	items := make([]*pendingClose, len(dues))
	for i, d := range dues {
		items[i] = &pendingClose{due: d}
	}
	slices.SortFunc(items, func(x, y *pendingClose) int { return x.due.Compare(y.due) })
	var sizes []int
	for _, g := range groupByDue(buckets, items, now) {
		sizes = append(sizes, len(g))
	}
	return sizes
}

// StockQueue names the stock events' queue.
func (b *Broker) StockQueue() string { return b.topo.stock }
