package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.NotEnoughReplicasException;

/**
 * Against three brokers with a control endpoint (CONTROL_URL): an idempotent producer with acks=all
 * writes to a topic with RF 3 and min.insync.replicas=2 while a follower goes down (produce goes on,
 * the ISR shrinks, then expands when it returns), while two go down (NOT_ENOUGH_REPLICAS, nothing
 * acknowledged is lost) and while the leader goes down (the client fails over). Every acknowledged
 * record is read back once, at the offset it was acknowledged at.
 */
final class FailoverScenario {
    private FailoverScenario() {}

    static final int BATCH = 500;

    static void run(Ctx ctx) throws Exception {
        String control = System.getenv("CONTROL_URL");
        check(control != null && !control.isEmpty(), "CONTROL_URL is not set");
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
        String topic = ctx.id("failover");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Util.admin(ctx)) {
            ctx.step("createTopics %s (RF 3, min.insync.replicas 2)", topic);
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 3).configs(Map.of("min.insync.replicas", "2"))))
                    .all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Util.waitForLeaders(admin, Map.of(topic, 1));
            Properties p = Util.producerProps(ctx, "producer");
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            Map<Long, Integer> acked = new HashMap<>();
            int next = 0;
            try (KafkaProducer<String, String> producer = Util.producer(p)) {
                next = produce(producer, topic, next, acked);
                int leader = describe(admin, topic).partitions().get(0).leader().id();
                int follower = leader % 3 + 1;

                ctx.step("follower %d down: produce goes on with two in sync", follower);
                post(http, control, "/brokers/" + follower + "/down");
                Util.waitUntil(OP_TIMEOUT_MS, "the ISR to shrink", () -> isr(admin, topic) == 2, () -> isr(admin, topic));
                next = produce(producer, topic, next, acked);
                post(http, control, "/brokers/" + follower + "/up");
                Util.waitUntil(OP_TIMEOUT_MS, "the ISR to expand", () -> isr(admin, topic) == 3, () -> isr(admin, topic));

                ctx.step("two brokers down: NOT_ENOUGH_REPLICAS");
                int other = 6 - leader - follower;
                post(http, control, "/brokers/" + follower + "/down");
                post(http, control, "/brokers/" + other + "/down");
                Properties strict = Util.producerProps(ctx, "strict");
                strict.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
                strict.put(ProducerConfig.ACKS_CONFIG, "all");
                strict.put(ProducerConfig.RETRIES_CONFIG, "0");
                try (KafkaProducer<String, String> once = Util.producer(strict)) {
                    Future<RecordMetadata> f = once.send(new ProducerRecord<>(topic, "refused"));
                    try {
                        f.get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                        throw new AssertionError("a record was acknowledged with one replica in sync");
                    } catch (ExecutionException e) {
                        check(e.getCause() instanceof NotEnoughReplicasException,
                                "expected NotEnoughReplicasException, got %s", e.getCause());
                    }
                }
                post(http, control, "/brokers/" + follower + "/up");
                post(http, control, "/brokers/" + other + "/up");
                Util.waitUntil(OP_TIMEOUT_MS, "the ISR to expand", () -> isr(admin, topic) == 3, () -> isr(admin, topic));

                ctx.step("leader %d down mid-stream: the producer fails over", leader);
                List<Future<RecordMetadata>> inFlight = new ArrayList<>();
                int first = next;
                for (int i = 0; i < BATCH; i++) {
                    inFlight.add(producer.send(new ProducerRecord<>(topic, Integer.toString(next++))));
                }
                post(http, control, "/brokers/" + leader + "/down");
                for (int i = 0; i < BATCH; i++) {
                    inFlight.add(producer.send(new ProducerRecord<>(topic, Integer.toString(next++))));
                }
                for (int i = 0; i < inFlight.size(); i++) {
                    RecordMetadata md = inFlight.get(i).get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    check(acked.put(md.offset(), first + i) == null, "two records acknowledged at offset %d", md.offset());
                }
                int newLeader = describe(admin, topic).partitions().get(0).leader().id();
                check(newLeader != leader, "the leader did not change");
                ctx.log("leader %d -> %d", leader, newLeader);
                post(http, control, "/brokers/" + leader + "/up");
            }

            ctx.step("read back: every acknowledged record once, at its offset");
            Util.Drained d = Util.drain(ctx, List.of(tp), "read_committed", 60_000);
            List<ConsumerRecord<String, String>> got = d.records().get(tp);
            checkEq(acked.size(), got.size(), "records read back");
            for (ConsumerRecord<String, String> r : got) {
                checkEq(acked.get(r.offset()), Integer.parseInt(r.value()), "value at offset " + r.offset());
            }
            ctx.log("%d records acknowledged, each read back once at its offset", acked.size());
        }
    }

    private static int produce(KafkaProducer<String, String> producer, String topic, int next, Map<Long, Integer> acked)
            throws Exception {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        int first = next;
        for (int i = 0; i < BATCH; i++) {
            fs.add(producer.send(new ProducerRecord<>(topic, Integer.toString(next++))));
        }
        for (int i = 0; i < fs.size(); i++) {
            RecordMetadata md = fs.get(i).get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            check(acked.put(md.offset(), first + i) == null, "two records acknowledged at offset %d", md.offset());
        }
        return next;
    }

    private static TopicDescription describe(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS)
                .get(topic);
    }

    private static int isr(Admin admin, String topic) {
        try {
            return describe(admin, topic).partitions().get(0).isr().size();
        } catch (Exception e) {
            return -1;
        }
    }

    private static void post(HttpClient http, String control, String path) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(control + path))
                .POST(HttpRequest.BodyPublishers.ofString("{}")).timeout(Duration.ofSeconds(60)).build(),
                HttpResponse.BodyHandlers.ofString());
        checkEq(200, r.statusCode(), "POST " + path + ": " + r.body());
    }
}
