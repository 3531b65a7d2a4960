package franzgo

// TestFailover: franz-go's producer (idempotent, acks=all: its defaults) against three brokers with
// RF 3 and min.insync.replicas=2 while a follower goes down and returns, while two brokers are down
// (NOT_ENOUGH_REPLICAS to a producer that does not retry), and while the leader goes down mid-stream.
// tests/e2e/test_cluster.py runs it (go test -run TestFailover in tests/go) with FAILOVER_SEEDS
// (the three brokers) and FAILOVER_CONTROL (the control endpoint); without them it skips. Every
// acknowledged record is then consumed once, at the offset it was acknowledged at.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func post(t *testing.T, control, path string) {
	t.Helper()
	resp, err := http.Post(control+path, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
}

func partitionState(ctx context.Context, cl *kgo.Client, topic string) (leader int32, isr int, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, 0, errors.New("no partition")
	}
	p := resp.Topics[0].Partitions[0]
	return p.Leader, len(p.ISR), kerr.ErrorForCode(p.ErrorCode)
}

func waitISR(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, want int) {
	t.Helper()
	for {
		_, isr, err := partitionState(ctx, cl, topic)
		if err == nil && isr == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the ISR of %s never reached %d (last %d, %v)", topic, want, isr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestFailover(t *testing.T) {
	seeds, control := os.Getenv("FAILOVER_SEEDS"), os.Getenv("FAILOVER_CONTROL")
	if seeds == "" || control == "" {
		t.Skip("FAILOVER_SEEDS and FAILOVER_CONTROL not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	topic := fmt.Sprintf("failover-go-%d", time.Now().UnixNano())
	admin, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := createTopic(ctx, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	waitISR(t, ctx, admin, topic, 3)

	producer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	acked := map[int64]int{}
	next := 0
	produce := func(n int) {
		var records []*kgo.Record
		for i := 0; i < n; i++ {
			records = append(records, &kgo.Record{Value: []byte(strconv.Itoa(next))})
			next++
		}
		results := producer.ProduceSync(ctx, records...)
		if err := results.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range results {
			v, _ := strconv.Atoi(string(r.Record.Value))
			if _, dup := acked[r.Record.Offset]; dup {
				t.Fatalf("two records acknowledged at offset %d", r.Record.Offset)
			}
			acked[r.Record.Offset] = v
		}
	}
	produce(300)
	leader, _, err := partitionState(ctx, admin, topic)
	if err != nil {
		t.Fatal(err)
	}
	follower := leader%3 + 1
	other := 6 - leader - follower

	// a follower down: produce goes on with two in sync
	post(t, control, fmt.Sprintf("/brokers/%d/down", follower))
	waitISR(t, ctx, admin, topic, 2)
	produce(300)
	post(t, control, fmt.Sprintf("/brokers/%d/up", follower))
	waitISR(t, ctx, admin, topic, 3)

	// two down: NOT_ENOUGH_REPLICAS to a producer that does not retry
	post(t, control, fmt.Sprintf("/brokers/%d/down", follower))
	post(t, control, fmt.Sprintf("/brokers/%d/down", other))
	once, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	err = once.ProduceSync(ctx, &kgo.Record{Value: []byte("refused")}).FirstErr()
	once.Close()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("with one replica in sync: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	post(t, control, fmt.Sprintf("/brokers/%d/up", follower))
	post(t, control, fmt.Sprintf("/brokers/%d/up", other))
	waitISR(t, ctx, admin, topic, 3)

	// the leader down mid-stream: the producer fails over
	done := make(chan struct{})
	go func() {
		defer close(done)
		produce(1000)
	}()
	time.Sleep(20 * time.Millisecond)
	post(t, control, fmt.Sprintf("/brokers/%d/down", leader))
	<-done
	newLeader, _, err := partitionState(ctx, admin, topic)
	if err != nil || newLeader == leader {
		t.Fatalf("the leader did not move from %d (now %d, %v)", leader, newLeader, err)
	}
	post(t, control, fmt.Sprintf("/brokers/%d/up", leader))

	consumer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := 0
	for seen < len(acked) {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		for _, r := range fetches.Records() {
			v, _ := strconv.Atoi(string(r.Value))
			want, ok := acked[r.Offset]
			if !ok || want != v {
				t.Fatalf("offset %d holds %d, acknowledged %d (%v)", r.Offset, v, want, ok)
			}
			seen++
		}
	}
	t.Logf("%d records acknowledged, each consumed once at its offset; leader %d -> %d", len(acked), leader, newLeader)
}
