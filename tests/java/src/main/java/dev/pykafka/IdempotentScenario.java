package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * The default producer (enable.idempotence=true, acks=all, 5 in flight): 10000 keyed records over 3
 * partitions; read back and check per partition: dense offsets, each record exactly once at the offset it
 * was acknowledged at, and per key the values in send order.
 */
final class IdempotentScenario {
    private IdempotentScenario() {}

    static final int N = 10_000;
    static final int KEYS = 50;

    static void run(Ctx ctx) throws Exception {
        String topic = ctx.id("t");
        ctx.step("createTopics %s", topic);
        try (Admin admin = Util.admin(ctx)) {
            Util.createTopics(admin, Map.of(topic, 3));
        }
        List<TopicPartition> tps = Util.partitions(topic, 3);
        Properties p = Util.producerProps(ctx, "producer");
        // all defaults for idempotence; state them to fail loudly if a default ever changes
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "4096"); // many batches, several in flight per partition
        Map<TopicPartition, Map<Long, Integer>> acked = new HashMap<>();
        ctx.step("produce %d records (idempotent)", N);
        try (KafkaProducer<String, String> producer = Util.producer(p)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>(N);
            for (int i = 0; i < N; i++) {
                fs.add(producer.send(new ProducerRecord<>(topic, "k" + (i % KEYS), Integer.toString(i))));
            }
            producer.flush();
            for (int i = 0; i < N; i++) {
                RecordMetadata md = fs.get(i).get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                Integer prev = acked.computeIfAbsent(new TopicPartition(md.topic(), md.partition()),
                        k -> new HashMap<>()).put(md.offset(), i);
                check(prev == null, "records %d and %d both acknowledged at %s-%d offset %d",
                        prev, i, md.topic(), md.partition(), md.offset());
            }
        }
        ctx.log("produced %d records, acked per partition: %s", N,
                acked.entrySet().stream().map(e -> e.getKey().partition() + "=" + e.getValue().size()).toList());

        ctx.step("read everything back");
        Util.Drained d = Util.drain(ctx, tps, "read_uncommitted", 60_000);
        checkEq(N, d.count(), "records read back");
        boolean[] seen = new boolean[N];
        Map<String, Integer> lastPerKey = new HashMap<>();
        for (TopicPartition tp : tps) {
            List<ConsumerRecord<String, String>> got = d.records().get(tp);
            Map<Long, Integer> exp = acked.getOrDefault(tp, Map.of());
            checkEq((long) exp.size(), d.endOffsets().get(tp), "end offset of " + tp);
            long next = 0;
            for (ConsumerRecord<String, String> r : got) {
                checkEq(next++, r.offset(), tp + ": gap or duplicate offset");
                int v = Integer.parseInt(r.value());
                check(!seen[v], "value %d seen twice (at %s@%d)", v, tp, r.offset());
                seen[v] = true;
                checkEq(exp.get(r.offset()), v, tp + "@" + r.offset() + " value vs acknowledged");
                checkEq("k" + (v % KEYS), r.key(), tp + "@" + r.offset() + " key");
                Integer last = lastPerKey.put(r.key(), v);
                check(last == null || last < v, "key %s: value %d after %d (out of order)", r.key(), v, last);
            }
        }
        for (int i = 0; i < N; i++) {
            check(seen[i], "value %d missing", i);
        }
        ctx.log("all %d records exactly once, in order per key", N);
    }
}
