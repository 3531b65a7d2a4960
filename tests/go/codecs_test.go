package franzgo

// TestCodecs: franz-go producing and consuming with its default producer settings (snappy) and with
// each of its codecs. tests/test_codecs.py runs it (go test -run TestCodecs in tests/go) with
// CODECS_SEEDS (bootstrap) and CODECS_TOPIC_PREFIX set; without them it skips. Each subtest makes
// topic <prefix>-<name> (one partition), produces records of several sizes (one far larger than
// an lz4 block) synchronously, then consumes the topic from the start and compares every record.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCodecs(t *testing.T) {
	seeds, prefix := os.Getenv("CODECS_SEEDS"), os.Getenv("CODECS_TOPIC_PREFIX")
	if seeds == "" || prefix == "" {
		t.Skip("CODECS_SEEDS and CODECS_TOPIC_PREFIX not set")
	}
	codecs := []struct {
		name string
		opts []kgo.Opt
	}{
		{"default", nil},
		{"none", []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}},
		{"gzip", []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}},
		{"snappy", []kgo.Opt{kgo.ProducerBatchCompression(kgo.SnappyCompression())}},
		{"lz4", []kgo.Opt{kgo.ProducerBatchCompression(kgo.Lz4Compression())}},
		{"zstd", []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}},
	}
	big := make([]byte, 100_000)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	big = append(big, bytes.Repeat([]byte("z"), 400_000)...)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			topic := prefix + "-" + c.name
			admin, err := kgo.NewClient(kgo.SeedBrokers(seeds))
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			if err := createTopic(ctx, admin, topic, 1, 1, nil); err != nil {
				t.Fatalf("create topic: %v", err)
			}
			producer, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds), kgo.DefaultProduceTopic(topic),
				kgo.ProducerLinger(5 * time.Millisecond)}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer producer.Close()
			var sent []*kgo.Record
			for i := 0; i < 300; i++ {
				value := bytes.Repeat([]byte(fmt.Sprintf("%s-%d|", c.name, i)), i%40+1)
				sent = append(sent, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i)), Value: value})
			}
			sent = append(sent, &kgo.Record{Key: []byte("big"), Value: big})
			if err := producer.ProduceSync(ctx, sent...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer consumer.Close()
			var got []*kgo.Record
			for len(got) < len(sent) {
				fetches := consumer.PollFetches(ctx)
				if err := fetches.Err(); err != nil {
					t.Fatalf("consume: %v", err)
				}
				got = append(got, fetches.Records()...)
			}
			if len(got) != len(sent) {
				t.Fatalf("consumed %d records, produced %d", len(got), len(sent))
			}
			for i := range sent {
				if got[i].Offset != int64(i) || !bytes.Equal(got[i].Key, sent[i].Key) ||
					!bytes.Equal(got[i].Value, sent[i].Value) {
					t.Fatalf("record %d differs (offset %d)", i, got[i].Offset)
				}
			}
		})
	}
}
