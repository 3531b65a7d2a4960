package franzgo

// TestKIP848Consumers: franz-go consumers in a KIP-848 ("next-gen", ConsumerGroupHeartbeat) group.
// tests/test_consumer_protocol.py runs it (go test -run TestKIP848 in tests/go) with
// KIP848_SEEDS (bootstrap), KIP848_TOPIC (an existing topic of KIP848_PARTITIONS partitions, empty)
// and KIP848_GROUP set; without them it skips.
//
// Two members split the partitions (disjoint, covering all), consume and commit; more records are
// produced; one member leaves without reading them and the other takes over every partition from the
// committed offsets: no record twice, none lost. franz-go falls back to the classic protocol without a
// word when the broker lacks ConsumerGroupHeartbeat, so its "next-gen" log line is required too.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	kip848PerPhase = 30
	kip848Deadline = 40 * time.Second
)

type kip848Member struct {
	name     string
	cl       *kgo.Client
	nextGen  atomic.Bool
	mu       sync.Mutex
	assigned map[int32]bool
	consumed []string
}

type kip848Logger struct{ m *kip848Member }

func (l kip848Logger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l kip848Logger) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if strings.Contains(msg, "next-gen") {
		l.m.nextGen.Store(true)
	}
}

func newKIP848Member(t *testing.T, name, seeds, topic, group string) *kip848Member {
	m := &kip848Member{name: name, assigned: map[int32]bool{}}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), // the server's "uniform" assignor
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.WithLogger(kip848Logger{m}),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				m.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
		}),
	)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m.cl = cl
	return m
}

func (m *kip848Member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.assigned))
}

func (m *kip848Member) String() string { return fmt.Sprint(m.name, m.partitions()) }

// pollAndCommit polls briefly; each record must be of an assigned partition; commits them synchronously.
func (m *kip848Member) pollAndCommit(t *testing.T) int {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	fs := m.cl.PollRecords(ctx, 500)
	cancel()
	fs.EachError(func(topic string, p int32, err error) {
		if err != context.DeadlineExceeded && err != context.Canceled {
			t.Fatalf("%s: fetch error %s[%d]: %v", m.name, topic, p, err)
		}
	})
	recs := fs.Records()
	m.mu.Lock()
	for _, r := range recs {
		if !m.assigned[r.Partition] {
			m.mu.Unlock()
			t.Fatalf("%s got a record of partition %d but is assigned %v", m.name, r.Partition, m.assigned)
		}
		want := strconv.Itoa(int(r.Partition)) + ":" + string(r.Key[1:])
		if string(r.Value) != want {
			m.mu.Unlock()
			t.Fatalf("%s: record value %q, want %q", m.name, r.Value, want)
		}
		m.consumed = append(m.consumed, string(r.Value))
	}
	m.mu.Unlock()
	if len(recs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.cl.CommitRecords(ctx, recs...); err != nil {
			t.Fatalf("%s: commit: %v", m.name, err)
		}
	}
	return len(recs)
}

func kip848Values(parts []int32, from int) map[string]bool {
	s := map[string]bool{}
	for _, p := range parts {
		for i := from; i < from+kip848PerPhase; i++ {
			s[fmt.Sprintf("%d:%d", p, i)] = true
		}
	}
	return s
}

func kip848CheckExactly(t *testing.T, who string, got []string, want map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("%s consumed %s twice", who, v)
		}
		if !want[v] {
			t.Fatalf("%s consumed unexpected record %s", who, v)
		}
		seen[v] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("%s consumed %d records, want %d", who, len(seen), len(want))
	}
}

func kip848Produce(t *testing.T, p *kgo.Client, topic string, partitions, from int) {
	var rs []*kgo.Record
	for i := from; i < from+kip848PerPhase; i++ {
		for part := 0; part < partitions; part++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(part), Key: []byte(fmt.Sprintf("k%d", i)),
				Value: []byte(fmt.Sprintf("%d:%d", part, i))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestKIP848Consumers(t *testing.T) {
	seeds, topic, group := os.Getenv("KIP848_SEEDS"), os.Getenv("KIP848_TOPIC"), os.Getenv("KIP848_GROUP")
	partitions, _ := strconv.Atoi(os.Getenv("KIP848_PARTITIONS"))
	if seeds == "" || topic == "" || group == "" || partitions < 2 {
		t.Skip("KIP848_SEEDS, KIP848_TOPIC, KIP848_GROUP and KIP848_PARTITIONS not set")
	}
	all := make([]int32, partitions)
	for i := range all {
		all[i] = int32(i)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	t0 := time.Now()
	c1 := newKIP848Member(t, "c1", seeds, topic, group)
	defer c1.cl.Close()
	c2 := newKIP848Member(t, "c2", seeds, topic, group)
	c2closed := false
	defer func() {
		if !c2closed {
			c2.cl.Close()
		}
	}()

	// the members split the partitions
	var seen []string
	for {
		for _, m := range []*kip848Member{c1, c2} {
			if n := m.pollAndCommit(t); n != 0 {
				t.Fatalf("%s consumed %d records before anything was produced", m.name, n)
			}
		}
		now := fmt.Sprint(c1, " ", c2)
		if len(seen) == 0 || seen[len(seen)-1] != now {
			seen = append(seen, now)
		}
		p1, p2 := c1.partitions(), c2.partitions()
		union := map[int32]bool{}
		for _, p := range append(slices.Clone(p1), p2...) {
			union[p] = true
		}
		if len(p1) > 0 && len(p2) > 0 && len(p1)+len(p2) == partitions && len(union) == partitions {
			break
		}
		if time.Since(t0) > kip848Deadline {
			t.Fatalf("no split of the partitions: %v", seen)
		}
	}
	_, e1 := c1.cl.GroupMetadata()
	_, e2 := c2.cl.GroupMetadata()
	t.Logf("split after %v via %v; member epochs %d, %d", time.Since(t0).Round(time.Millisecond), seen, e1, e2)
	if !c1.nextGen.Load() || !c2.nextGen.Load() {
		t.Fatalf("franz-go did not use the KIP-848 protocol (no next-gen log line): c1 %v c2 %v",
			c1.nextGen.Load(), c2.nextGen.Load())
	}

	// phase 1: each consumes exactly its partitions' records
	kip848Produce(t, producer, topic, partitions, 0)
	deadline := time.Now().Add(kip848Deadline)
	for len(c1.consumed)+len(c2.consumed) < partitions*kip848PerPhase {
		if time.Now().After(deadline) {
			t.Fatalf("phase 1: consumed %d + %d records", len(c1.consumed), len(c2.consumed))
		}
		c1.pollAndCommit(t)
		c2.pollAndCommit(t)
	}
	settle := func(ms ...*kip848Member) {
		until := time.Now().Add(time.Second)
		for time.Now().Before(until) {
			for _, m := range ms {
				if n := m.pollAndCommit(t); n != 0 {
					t.Fatalf("%s: %d unexpected extra records", m.name, n)
				}
			}
		}
	}
	settle(c1, c2)
	kip848CheckExactly(t, "c1", c1.consumed, kip848Values(c1.partitions(), 0))
	kip848CheckExactly(t, "c2", c2.consumed, kip848Values(c2.partitions(), 0))

	// phase 2: c2 leaves with records unread, c1 takes over from the committed offsets
	kip848Produce(t, producer, topic, partitions, kip848PerPhase)
	c1.consumed = nil
	c2.cl.Close() // leaves the group (heartbeat with member epoch -1)
	c2closed = true
	t1 := time.Now()
	want := kip848Values(all, kip848PerPhase)
	for len(c1.partitions()) < partitions || len(c1.consumed) < len(want) {
		if time.Since(t1) > kip848Deadline {
			t.Fatalf("no takeover: %v, %d records", c1, len(c1.consumed))
		}
		c1.pollAndCommit(t)
	}
	_, e1 = c1.cl.GroupMetadata()
	t.Logf("takeover in %v; member epoch %d", time.Since(t1).Round(time.Millisecond), e1)
	settle(c1)
	kip848CheckExactly(t, "c1", c1.consumed, want)
}
