package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Admin's transaction APIs around a real transaction: listTransactions (with state and producer-id
 * filters), describeTransactions (state, producer id, timeout, partitions) and describeProducers (active
 * producer, open transaction's first offset) after a commit, during an open transaction and after an abort.
 */
final class AdminTransactionsScenario {
    private AdminTransactionsScenario() {}

    static final int TXN_TIMEOUT_MS = 20_000;

    static void run(Ctx ctx) throws Exception {
        String topic = ctx.id("t");
        String txnId = ctx.id("txn");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        Properties pp = Util.producerProps(ctx, "producer");
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Integer.toString(TXN_TIMEOUT_MS));
        try (Admin admin = Util.admin(ctx); KafkaProducer<String, String> producer = Util.producer(pp)) {
            ctx.step("createTopics %s", topic);
            Util.createTopics(admin, Map.of(topic, 2));

            ctx.step("a committed transaction over both partitions");
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
                producer.send(new ProducerRecord<>(topic, 1, "k" + i, "v" + i));
            }
            producer.commitTransaction();
            TransactionDescription td = awaitState(admin, txnId, TransactionState.COMPLETE_COMMIT);
            long pid = td.producerId();
            check(pid >= 0, "describeTransactions: producer id %d", pid);
            checkEq(TXN_TIMEOUT_MS, td.transactionTimeoutMs(), "describeTransactions transactionTimeoutMs");
            check(td.topicPartitions().isEmpty(), "completed transaction still lists partitions %s", td.topicPartitions());
            check(td.coordinatorId() >= 0, "describeTransactions coordinatorId %d", td.coordinatorId());
            ctx.log("after commit: %s", td);

            ctx.step("listTransactions / describeProducers after the commit");
            TransactionListing tl = listing(admin, new ListTransactionsOptions(), txnId);
            check(tl != null, "listTransactions() lacks %s", txnId);
            checkEq(pid, tl.producerId(), "listTransactions producerId");
            checkEq(TransactionState.COMPLETE_COMMIT, tl.state(), "listTransactions state");
            check(listing(admin, new ListTransactionsOptions().filterProducerIds(Set.of(pid)), txnId) != null,
                    "listTransactions(filterProducerIds %d) lacks %s", pid, txnId);
            check(listing(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING)), txnId) == null,
                    "listTransactions(filterStates ONGOING) lists completed %s", txnId);

            for (TopicPartition tp : List.of(p0, p1)) {
                ProducerState ps = producerState(admin, tp, pid);
                check(ps != null, "describeProducers(%s) lacks producer %d", tp, pid);
                check(ps.currentTransactionStartOffset().isEmpty(), "%s: committed txn still open at %s",
                        tp, ps.currentTransactionStartOffset());
                check(ps.lastTimestamp() > 0, "%s: lastTimestamp %d", tp, ps.lastTimestamp());
            }

            ctx.step("an open transaction on %s", p0);
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "open" + i, "open" + i));
            }
            producer.flush();
            td = awaitState(admin, txnId, TransactionState.ONGOING);
            checkEq(pid, td.producerId(), "describeTransactions producerId of the open txn");
            checkEq(Set.of(p0), td.topicPartitions(), "describeTransactions partitions of the open txn");
            check(td.transactionStartTimeMs().isPresent() && td.transactionStartTimeMs().getAsLong() > 0,
                    "open txn has no start time: %s", td);
            ctx.log("open: %s", td);
            check(listing(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING)), txnId) != null,
                    "listTransactions(filterStates ONGOING) lacks open %s", txnId);

            ProducerState ps0 = producerState(admin, p0, pid);
            check(ps0 != null, "describeProducers(%s) lacks producer %d during the open txn", p0, pid);
            // 10 committed records at 0..9, the commit marker at 10: the open transaction starts at 11
            checkEq(Optional.of(11L), ps0.currentTransactionStartOffset().isPresent()
                    ? Optional.of(ps0.currentTransactionStartOffset().getAsLong()) : Optional.empty(),
                    "describeProducers(" + p0 + ") currentTransactionStartOffset");
            checkEq(4, ps0.lastSequence(), "describeProducers(" + p0 + ") lastSequence of the open txn's batch");
            ProducerState ps1 = producerState(admin, p1, pid);
            check(ps1 == null || ps1.currentTransactionStartOffset().isEmpty(),
                    "%s is not in the open txn but shows %s", p1, ps1);

            ctx.step("abort");
            producer.abortTransaction();
            td = awaitState(admin, txnId, TransactionState.COMPLETE_ABORT);
            check(td.topicPartitions().isEmpty(), "aborted transaction still lists partitions %s", td.topicPartitions());
            ProducerState after = producerState(admin, p0, pid);
            check(after != null && after.currentTransactionStartOffset().isEmpty(),
                    "%s: aborted txn still open: %s", p0, after);
            ctx.log("after abort: %s", td);
        }
    }

    static TransactionDescription awaitState(Admin admin, String txnId, TransactionState state) throws Exception {
        long deadline = System.currentTimeMillis() + 15_000;
        TransactionDescription td;
        while (true) {
            td = admin.describeTransactions(List.of(txnId)).description(txnId).get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            if (td.state() == state) {
                return td;
            }
            check(System.currentTimeMillis() < deadline, "transaction %s never reached %s: %s", txnId, state, td);
            Thread.sleep(100);
        }
    }

    static TransactionListing listing(Admin admin, ListTransactionsOptions opts, String txnId) throws Exception {
        Collection<TransactionListing> all = admin.listTransactions(opts).all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        return all.stream().filter(l -> l.transactionalId().equals(txnId)).findFirst().orElse(null);
    }

    static ProducerState producerState(Admin admin, TopicPartition tp, long pid) throws Exception {
        PartitionProducerState st = admin.describeProducers(List.of(tp)).partitionResult(tp)
                .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        return st.activeProducers().stream().filter(p -> p.producerId() == pid).findFirst().orElse(null);
    }
}
