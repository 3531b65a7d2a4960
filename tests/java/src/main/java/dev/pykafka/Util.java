package dev.pykafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Client configs with short timeouts, assertions, topic setup and "read everything" helpers. */
final class Util {
    /** Timeout for any single admin call or future. */
    static final long OP_TIMEOUT_MS = 30_000;

    private Util() {}

    // ---- assertions ---------------------------------------------------------------------------------

    static void check(boolean cond, String fmt, Object... args) {
        if (!cond) {
            throw new AssertionError(String.format(fmt, args));
        }
    }

    static void checkEq(Object expected, Object actual, String what) {
        if (isIntegral(expected) && isIntegral(actual)) {
            if (((Number) expected).longValue() != ((Number) actual).longValue()) {
                throw new AssertionError(what + ": expected <" + expected + "> but got <" + actual + ">");
            }
            return;
        }
        if (!Objects.equals(expected, actual)) {
            throw new AssertionError(what + ": expected <" + expected + "> but got <" + actual + ">");
        }
    }

    private static boolean isIntegral(Object o) {
        return o instanceof Long || o instanceof Integer || o instanceof Short || o instanceof Byte;
    }

    /** Polls {@code cond} until true or {@code timeoutMs}; then fails with the last value described. */
    static void waitUntil(long timeoutMs, String what, Supplier<Boolean> cond, Supplier<Object> describe)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            if (cond.get()) {
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting for " + what
                        + (describe == null ? "" : "; last: " + describe.get()));
            }
            Thread.sleep(100);
        }
    }

    // ---- client configs ------------------------------------------------------------------------------

    static Properties common(Ctx ctx, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", ctx.bootstrap);
        p.put("client.id", ctx.id(clientId));
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        p.put("socket.connection.setup.timeout.ms", "5000");
        p.put("socket.connection.setup.timeout.max.ms", "10000");
        p.put("reconnect.backoff.max.ms", "1000");
        p.put("retry.backoff.max.ms", "1000");
        p.put("metadata.max.age.ms", "10000");
        // SCENARIO_CLIENT_CONFIG: a properties file every client also takes (security.protocol, ssl.*, sasl.*)
        String extra = System.getenv("SCENARIO_CLIENT_CONFIG");
        if (extra != null && !extra.isEmpty()) {
            try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(extra))) {
                p.load(r);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        return p;
    }

    static Admin admin(Ctx ctx) {
        Properties p = common(ctx, "admin");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static Properties producerProps(Ctx ctx, String clientId) {
        Properties p = common(ctx, clientId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "45000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return p;
    }

    static KafkaProducer<String, String> producer(Properties p) {
        return new KafkaProducer<>(p);
    }

    static Properties consumerProps(Ctx ctx, String clientId, String groupId, String isolation) {
        Properties p = common(ctx, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        if (groupId != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
            p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        }
        return p;
    }

    // ---- topics ----------------------------------------------------------------------------------------

    /** The replication factor of the scenarios' topics: SCENARIO_REPLICATION_FACTOR, else 1. */
    static short replicationFactor() {
        String rf = System.getenv("SCENARIO_REPLICATION_FACTOR");
        return rf == null || rf.isEmpty() ? (short) 1 : Short.parseShort(rf);
    }

    /** Creates topics (name -> partitions, RF as above) and waits until every partition has a leader. */
    static void createTopics(Admin admin, Map<String, Integer> topics) throws Exception {
        List<NewTopic> nts = new ArrayList<>();
        short rf = replicationFactor();
        topics.forEach((t, n) -> nts.add(new NewTopic(t, n, rf)));
        admin.createTopics(nts).all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        waitForLeaders(admin, topics);
    }

    static void waitForLeaders(Admin admin, Map<String, Integer> topics) throws Exception {
        long deadline = System.currentTimeMillis() + OP_TIMEOUT_MS;
        Object last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                Map<String, TopicDescription> d = admin.describeTopics(topics.keySet()).allTopicNames()
                        .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                boolean ok = topics.entrySet().stream().allMatch(e -> {
                    TopicDescription td = d.get(e.getKey());
                    return td != null && td.partitions().size() == e.getValue()
                            && td.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty());
                });
                if (ok) {
                    return;
                }
                last = d;
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("topics " + topics + " have no leaders after " + OP_TIMEOUT_MS + " ms: " + last);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> l = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            l.add(new TopicPartition(topic, i));
        }
        return l;
    }

    // ---- reading ---------------------------------------------------------------------------------------

    /** Everything one partition holds for an isolation level, in offset order, with the end offset seen. */
    record Drained(Map<TopicPartition, List<ConsumerRecord<String, String>>> records,
                   Map<TopicPartition, Long> endOffsets) {
        int count() {
            return records.values().stream().mapToInt(List::size).sum();
        }

        List<String> values(TopicPartition tp) {
            List<String> l = new ArrayList<>();
            for (ConsumerRecord<String, String> r : records.getOrDefault(tp, List.of())) {
                l.add(r.value());
            }
            return l;
        }
    }

    /**
     * Reads the given partitions from the beginning with a group-less consumer until its position reaches
     * the end offset (the high watermark for read_uncommitted, the last stable offset for read_committed)
     * taken at the start. Fails on a record at or past that end, or on offsets going backwards.
     */
    static Drained drain(Ctx ctx, Collection<TopicPartition> tps, String isolation, long timeoutMs) {
        Map<TopicPartition, List<ConsumerRecord<String, String>>> out = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(ctx, "drain", null, isolation))) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(OP_TIMEOUT_MS));
            for (TopicPartition tp : tps) {
                out.put(tp, new ArrayList<>());
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            Set<TopicPartition> pending = new HashSet<>(tps);
            while (true) {
                pending.removeIf(tp -> c.position(tp, Duration.ofMillis(OP_TIMEOUT_MS)) >= end.get(tp));
                if (pending.isEmpty()) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    Map<TopicPartition, Long> pos = new HashMap<>();
                    for (TopicPartition tp : pending) {
                        pos.put(tp, c.position(tp));
                    }
                    throw new AssertionError("drain(" + isolation + ") timed out after " + timeoutMs
                            + " ms; positions " + pos + " end offsets " + end);
                }
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    List<ConsumerRecord<String, String>> l = out.get(tp);
                    check(l != null, "record from unassigned partition %s", tp);
                    check(r.offset() < end.get(tp), "%s: record at offset %d >= end offset %d (%s)",
                            tp, r.offset(), end.get(tp), isolation);
                    check(l.isEmpty() || l.get(l.size() - 1).offset() < r.offset(),
                            "%s: offset %d not after previous %d", tp, r.offset(),
                            l.isEmpty() ? -1 : l.get(l.size() - 1).offset());
                    l.add(r);
                }
            }
            return new Drained(out, end);
        }
    }

    /**
     * Waits until no transaction holds back any of the partitions (last stable offset equals high watermark).
     * EndTxn is answered once the prepare record is in the transaction log and the markers follow (as in
     * Kafka), so right after commitTransaction() a read_committed reader may still stop short of the commit.
     */
    static void awaitStable(Ctx ctx, Collection<TopicPartition> tps) throws InterruptedException {
        waitUntil(OP_TIMEOUT_MS, "no open transaction on " + tps,
                () -> endOffsets(ctx, tps, "read_committed").equals(endOffsets(ctx, tps, "read_uncommitted")),
                () -> endOffsets(ctx, tps, "read_committed") + " vs " + endOffsets(ctx, tps, "read_uncommitted"));
    }

    static Map<TopicPartition, Long> endOffsets(Ctx ctx, Collection<TopicPartition> tps, String isolation) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(ctx, "end", null, isolation))) {
            return c.endOffsets(tps, Duration.ofMillis(OP_TIMEOUT_MS));
        }
    }

    static Throwable rootCause(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

    /** True if {@code t} or one of its causes is an instance of one of {@code types}. */
    @SafeVarargs
    static boolean causedBy(Throwable t, Class<? extends Throwable>... types) {
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            for (Class<? extends Throwable> ty : types) {
                if (ty.isInstance(c)) {
                    return true;
                }
            }
        }
        return false;
    }
}
