package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Exactly-once consume-transform-produce: a read_committed group consumer reads the input, a transactional
 * producer writes the output and commits the consumer's offsets in the same transaction
 * (sendOffsetsToTransaction with consumer.groupMetadata()). Every third batch is aborted and reprocessed
 * from the committed offsets. At the end the output holds each input record exactly once, in order, and the
 * group's committed offsets equal the input's end offsets.
 */
final class ConsumeTransformProduceScenario {
    private ConsumeTransformProduceScenario() {}

    static final int PARTITIONS = 3;
    static final int PER_PARTITION = 100;

    static void run(Ctx ctx) throws Exception {
        String in = ctx.id("in");
        String out = ctx.id("out");
        String group = ctx.id("group");
        List<TopicPartition> inTps = Util.partitions(in, PARTITIONS);
        List<TopicPartition> outTps = Util.partitions(out, PARTITIONS);
        ctx.step("createTopics %s, %s", in, out);
        try (Admin admin = Util.admin(ctx)) {
            Util.createTopics(admin, Map.of(in, PARTITIONS, out, PARTITIONS));
        }

        ctx.step("produce the input");
        try (KafkaProducer<String, String> p = Util.producer(Util.producerProps(ctx, "input-producer"))) {
            for (int i = 0; i < PER_PARTITION; i++) {
                for (int part = 0; part < PARTITIONS; part++) {
                    p.send(new ProducerRecord<>(in, part, "k" + i, "in-" + part + "-" + i));
                }
            }
            p.flush();
        }
        ctx.log("input: %d records", PARTITIONS * PER_PARTITION);

        Properties cp = Util.consumerProps(ctx, "ctp-consumer", group, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        Properties pp = Util.producerProps(ctx, "ctp-producer");
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, ctx.id("txn"));
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");

        int batches = 0;
        int commits = 0;
        int aborts = 0;
        Map<TopicPartition, Long> done = new HashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            ctx.step("initTransactions");
            producer.initTransactions();
            ctx.step("consume-transform-produce loop");
            consumer.subscribe(List.of(in));
            long deadline = System.currentTimeMillis() + 60_000;
            while (!allDone(done, inTps)) {
                check(System.currentTimeMillis() < deadline,
                        "consume-transform-produce did not finish in 60 s: committed %s after %d commits, %d aborts",
                        done, commits, aborts);
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                batches++;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : recs.partitions()) {
                    List<ConsumerRecord<String, String>> l = recs.records(tp);
                    for (ConsumerRecord<String, String> r : l) {
                        producer.send(new ProducerRecord<>(out, r.partition(), r.key(), "out:" + r.value()));
                    }
                    offsets.put(tp, new OffsetAndMetadata(l.get(l.size() - 1).offset() + 1, "batch " + batches));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (batches % 3 == 2) {
                    producer.flush(); // the aborted output really reaches the log
                    producer.abortTransaction();
                    aborts++;
                    // rewind to the committed offsets (require_stable OffsetFetch) and reprocess
                    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata om = committed.get(tp);
                        if (om == null) {
                            consumer.seekToBeginning(Set.of(tp));
                        } else {
                            consumer.seek(tp, om.offset());
                        }
                    }
                    ctx.log("batch %d (%d records) aborted; rewound to %s", batches, recs.count(), committed);
                } else {
                    producer.commitTransaction();
                    commits++;
                    offsets.forEach((tp, om) -> done.put(tp, om.offset()));
                }
            }
            ctx.log("processed: %d batches, %d committed, %d aborted", batches, commits, aborts);
            check(aborts >= 2 && commits >= 2, "expected several commits and aborts, got %d / %d", commits, aborts);

            ctx.step("check the group's committed offsets");
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.copyOf(inTps),
                    Duration.ofMillis(OP_TIMEOUT_MS));
            for (TopicPartition tp : inTps) {
                check(committed.get(tp) != null, "no committed offset for %s", tp);
                checkEq((long) PER_PARTITION, committed.get(tp).offset(), "consumer.committed(" + tp + ")");
            }
        }

        // the group's offsets, as an admin sees them
        try (Admin admin = Util.admin(ctx)) {
            Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            for (TopicPartition tp : inTps) {
                check(offs.get(tp) != null, "listConsumerGroupOffsets: no offset for %s: %s", tp, offs);
                checkEq((long) PER_PARTITION, offs.get(tp).offset(), "listConsumerGroupOffsets(" + tp + ")");
            }
        }

        ctx.step("check the output");
        // the output: each input exactly once, in input order, for read_committed
        Util.awaitStable(ctx, outTps);
        Util.Drained rc = Util.drain(ctx, outTps, "read_committed", 30_000);
        Util.Drained ru = Util.drain(ctx, outTps, "read_uncommitted", 30_000);
        for (int part = 0; part < PARTITIONS; part++) {
            TopicPartition tp = outTps.get(part);
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < PER_PARTITION; i++) {
                expected.add("out:in-" + part + "-" + i);
            }
            checkEq(expected, rc.values(tp), "read_committed output of " + tp);
        }
        check(ru.count() > rc.count(), "read_uncommitted output (%d) should include aborted records beyond %d",
                ru.count(), rc.count());
        ctx.log("output verified: %d committed records, %d incl. aborted", rc.count(), ru.count());
    }

    static boolean allDone(Map<TopicPartition, Long> done, List<TopicPartition> tps) {
        for (TopicPartition tp : tps) {
            Long o = done.get(tp);
            if (o == null || o < PER_PARTITION) {
                return false;
            }
        }
        return true;
    }
}
