package dev.pykafka;

import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * A transactional producer commits and aborts alternately across 3 partitions of 2 topics.
 * read_committed sees exactly the committed records, read_uncommitted sees all of them; each transaction
 * leaves one marker offset per partition. An open transaction holds the last stable offset back.
 * A second producer with the same transactional.id aborts the open transaction and fences the first.
 */
final class TransactionsScenario {
    private TransactionsScenario() {}

    static final int TXNS = 10;
    static final int PER_PARTITION = 5;

    static Properties txProps(Ctx ctx, String clientId, String txnId) {
        Properties p = Util.producerProps(ctx, clientId);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        return p;
    }

    static void run(Ctx ctx) throws Exception {
        String a = ctx.id("a");
        String b = ctx.id("b");
        ctx.step("createTopics %s, %s", a, b);
        try (Admin admin = Util.admin(ctx)) {
            Util.createTopics(admin, Map.of(a, 2, b, 1));
        }
        List<TopicPartition> tps = List.of(new TopicPartition(a, 0), new TopicPartition(a, 1), new TopicPartition(b, 0));
        String txnId = ctx.id("txn");
        Map<TopicPartition, List<String>> all = new HashMap<>();
        Map<TopicPartition, List<String>> committed = new HashMap<>();
        for (TopicPartition tp : tps) {
            all.put(tp, new ArrayList<>());
            committed.put(tp, new ArrayList<>());
        }

        KafkaProducer<String, String> p1 = Util.producer(txProps(ctx, "p1", txnId));
        try {
            ctx.step("p1.initTransactions");
            p1.initTransactions();
            ctx.log("initTransactions done");
            for (int t = 0; t < TXNS; t++) {
                boolean commit = t % 2 == 0;
                ctx.step("transaction %d (%s)", t, commit ? "commit" : "abort");
                p1.beginTransaction();
                for (TopicPartition tp : tps) {
                    for (int j = 0; j < PER_PARTITION; j++) {
                        String v = "txn" + t + "-" + tp + "-" + j + (commit ? "-c" : "-a");
                        p1.send(new ProducerRecord<>(tp.topic(), tp.partition(), "k" + j, v));
                        all.get(tp).add(v);
                        if (commit) {
                            committed.get(tp).add(v);
                        }
                    }
                }
                if (commit) {
                    p1.commitTransaction();
                } else {
                    p1.flush(); // make sure the aborted data really reached the log
                    p1.abortTransaction();
                }
            }
            ctx.log("%d transactions done (%d committed)", TXNS, (TXNS + 1) / 2);

            long endAfterTxns = (long) TXNS * (PER_PARTITION + 1); // data + one marker per transaction
            ctx.step("verify committed / all records");
            verify(ctx, tps, committed, all, endAfterTxns, endAfterTxns);

            ctx.step("open transaction: LSO stays at its first offset");
            p1.beginTransaction();
            for (TopicPartition tp : tps) {
                for (int j = 0; j < PER_PARTITION; j++) {
                    String v = "open-" + tp + "-" + j;
                    p1.send(new ProducerRecord<>(tp.topic(), tp.partition(), "k" + j, v));
                    all.get(tp).add(v);
                }
            }
            p1.flush();
            Map<TopicPartition, Long> lso = Util.endOffsets(ctx, tps, "read_committed");
            Map<TopicPartition, Long> hw = Util.endOffsets(ctx, tps, "read_uncommitted");
            for (TopicPartition tp : tps) {
                checkEq(endAfterTxns, lso.get(tp), "LSO of " + tp + " with an open transaction");
                checkEq(endAfterTxns + PER_PARTITION, hw.get(tp), "high watermark of " + tp + " with an open transaction");
            }
            ctx.log("open transaction: LSO %s, HW %s", lso, hw);
            Util.Drained rc = Util.drain(ctx, tps, "read_committed", 30_000);
            for (TopicPartition tp : tps) {
                checkEq(committed.get(tp), rc.values(tp), "read_committed values of " + tp + " while a txn is open");
            }

            // --- fencing: a new producer with the same id aborts the open transaction and fences p1
            try (KafkaProducer<String, String> p2 = Util.producer(txProps(ctx, "p2", txnId))) {
                ctx.step("p2.initTransactions with the same transactional.id");
                p2.initTransactions();
                ctx.log("p2 initTransactions done (should have aborted p1's open transaction)");
                try {
                    p1.commitTransaction();
                    throw new AssertionError("p1.commitTransaction() succeeded after p2 took over " + txnId);
                } catch (AssertionError e) {
                    throw e;
                } catch (Exception e) {
                    check(Util.causedBy(e, ProducerFencedException.class, InvalidProducerEpochException.class),
                            "p1 commit after fencing: expected ProducerFencedException, got %s", e);
                    ctx.log("p1 fenced: %s", e);
                }
                ctx.step("verify after fencing");
                long endAfterFence = endAfterTxns + PER_PARTITION + 1; // + abort marker
                verify(ctx, tps, committed, all, endAfterFence, endAfterFence);

                ctx.step("p2 commits a transaction");
                p2.beginTransaction();
                for (TopicPartition tp : tps) {
                    String v = "p2-" + tp;
                    p2.send(new ProducerRecord<>(tp.topic(), tp.partition(), "k", v));
                    all.get(tp).add(v);
                    committed.get(tp).add(v);
                }
                p2.commitTransaction();
                verify(ctx, tps, committed, all, endAfterFence + 2, endAfterFence + 2);
            }
        } finally {
            p1.close();
        }
    }

    static void verify(Ctx ctx, List<TopicPartition> tps, Map<TopicPartition, List<String>> committed,
                       Map<TopicPartition, List<String>> all, long expectedLso, long expectedHw)
            throws InterruptedException {
        Util.awaitStable(ctx, tps); // the markers of the last EndTxn are written
        Util.Drained rc = Util.drain(ctx, tps, "read_committed", 30_000);
        Util.Drained ru = Util.drain(ctx, tps, "read_uncommitted", 30_000);
        for (TopicPartition tp : tps) {
            checkEq(expectedLso, rc.endOffsets().get(tp), "read_committed end offset (LSO) of " + tp);
            checkEq(expectedHw, ru.endOffsets().get(tp), "read_uncommitted end offset (HW) of " + tp);
            checkEq(committed.get(tp), rc.values(tp), "read_committed values of " + tp);
            checkEq(all.get(tp), ru.values(tp), "read_uncommitted values of " + tp);
            for (ConsumerRecord<String, String> r : ru.records().get(tp)) {
                check(r.value() != null, "%s@%d: null value (a control record leaked?)", tp, r.offset());
            }
        }
        ctx.log("verified: read_committed %d records, read_uncommitted %d records", rc.count(), ru.count());
    }
}
