package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * Fault injection for the Java client's transactions (Transactions V2, KIP-890: Produce v12+ adds the
 * partition, EndTxn v5 bumps the epoch) against three brokers with a control endpoint (CONTROL_URL):
 * librdkafka's transaction mock scenarios (pushed request errors, a coordinator moved or taken down,
 * a leader change, a slow answer, a zombie fenced) with the stock producer. Each sub-scenario uses its
 * own transactional id, scopes its faults to it, checks what the client did (it retries and commits,
 * or fails with the right exception), what it sent (the request log: GET /requests) and that
 * read_committed sees the committed records exactly once.
 *
 * <p>TXN_FAULTS=a,b runs only those sub-scenarios. Each prints {@code SUB OK <name>} or
 * {@code SUB FAIL <name>: <what>}; the scenario fails if any did.
 */
final class TxnFaultsScenario {
    private TxnFaultsScenario() {}

    static final int PARTITIONS = 3;

    interface Sub {
        void run(TxnFaultsScenario.Env env, String name) throws Exception;
    }

    static final Map<String, Sub> SUBS = new LinkedHashMap<>();

    static {
        SUBS.put("tv2-versions", TxnFaultsScenario::tv2Versions);
        SUBS.put("find-coordinator-errors", TxnFaultsScenario::findCoordinatorErrors);
        SUBS.put("init-producer-id-errors", TxnFaultsScenario::initProducerIdErrors);
        SUBS.put("endtxn-not-coordinator-moved", TxnFaultsScenario::endTxnCoordinatorMoved);
        SUBS.put("produce-leader-change", TxnFaultsScenario::produceLeaderChange);
        SUBS.put("endtxn-timeout-retry", TxnFaultsScenario::endTxnTimeoutRetry);
        SUBS.put("zombie-fenced", TxnFaultsScenario::zombieFenced);
        SUBS.put("zombie-send-fenced", TxnFaultsScenario::zombieSendFenced);
        SUBS.put("coordinator-down", TxnFaultsScenario::coordinatorDown);
        SUBS.put("coordinator-down-during-commit", TxnFaultsScenario::coordinatorDownDuringCommit);
    }

    /** What the sub-scenarios share: the context, the control endpoint and a topic of three partitions at RF 3. */
    record Env(Ctx ctx, Control control, String topic, List<TopicPartition> tps) {}

    static void run(Ctx ctx) throws Exception {
        String url = System.getenv("CONTROL_URL");
        check(url != null && !url.isEmpty(), "CONTROL_URL is not set");
        Control control = new Control(url);
        String topic = ctx.id("data");
        ctx.step("createTopics %s (%d partitions, RF 3)", topic, PARTITIONS);
        try (Admin admin = Util.admin(ctx)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 3))).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Util.waitForLeaders(admin, Map.of(topic, PARTITIONS));
        }
        Env env = new Env(ctx, control, topic, Util.partitions(topic, PARTITIONS));
        waitFullIsr(env);

        String only = System.getenv("TXN_FAULTS");
        List<String> names = only == null || only.isBlank() ? new ArrayList<>(SUBS.keySet())
                : Arrays.stream(only.split(",")).map(String::trim).filter(s -> !s.isEmpty()).toList();
        List<String> failed = new ArrayList<>();
        for (String name : names) {
            Sub sub = SUBS.get(name);
            check(sub != null, "unknown sub-scenario %s; known: %s", name, SUBS.keySet());
            long t0 = System.nanoTime();
            ctx.step("%s", name);
            try {
                sub.run(env, name);
                System.out.printf("SUB OK %s (%.1f s)%n", name, (System.nanoTime() - t0) / 1e9);
            } catch (Throwable t) {
                t.printStackTrace(System.err);
                String what = t instanceof AssertionError ? String.valueOf(t.getMessage()) : t.toString();
                System.out.println("SUB FAIL " + name + ": " + what.replace('\n', ' ') + " (during: " + ctx.step + ")");
                failed.add(name);
            } finally {
                System.out.flush();
                control.clearFaults();
            }
        }
        check(failed.isEmpty(), "sub-scenarios failed: %s", failed);
    }

    // ---- helpers ----------------------------------------------------------------------------------

    static Properties txProps(Env env, String clientId, String txnId) {
        Properties p = Util.producerProps(env.ctx, clientId);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        return p;
    }

    /** The records a sub-scenario committed, per partition in order; checked against read_committed. */
    static final class Expected {
        final Map<Integer, List<String>> byPartition = new TreeMap<>();

        void add(int partition, String value) {
            byPartition.computeIfAbsent(partition, k -> new ArrayList<>()).add(value);
        }
    }

    /** Sends {@code n} records (values {@code <name>:<tag>-<i>}) round-robin over the partitions. */
    static List<String> send(Env env, KafkaProducer<String, String> p, String name, String tag, int n,
                             Expected committed) {
        List<String> values = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int partition = i % PARTITIONS;
            String v = name + ":" + tag + "-" + i;
            p.send(new ProducerRecord<>(env.topic, partition, "k", v));
            if (committed != null) {
                committed.add(partition, v);
            }
            values.add(v);
        }
        return values;
    }

    /** read_committed holds exactly {@code committed} among this sub-scenario's records, each once, in order. */
    static void checkReadCommitted(Env env, String name, Expected committed) throws Exception {
        env.ctx.step("%s: read_committed holds the committed records exactly once", name);
        Util.awaitStable(env.ctx, env.tps); // every transaction complete, its markers written
        Util.Drained d = Util.drain(env.ctx, env.tps, "read_committed", 60_000);
        Map<Integer, List<String>> got = new TreeMap<>();
        for (TopicPartition tp : env.tps) {
            List<String> mine = d.values(tp).stream().filter(v -> v.startsWith(name + ":")).collect(Collectors.toList());
            if (!mine.isEmpty()) {
                got.put(tp.partition(), mine);
            }
        }
        checkEq(committed.byPartition, got, name + ": read_committed records per partition");
        // read_uncommitted cannot hold any of them twice either (no duplicate appends from the retries)
        Util.Drained u = Util.drain(env.ctx, env.tps, "read_uncommitted", 60_000);
        for (TopicPartition tp : env.tps) {
            List<String> mine = u.values(tp).stream().filter(v -> v.startsWith(name + ":")).toList();
            check(mine.size() == mine.stream().distinct().count(), "%s: %s holds a record twice: %s", name, tp, mine);
        }
    }

    static void waitFullIsr(Env env) throws Exception {
        for (TopicPartition tp : env.tps) {
            Util.waitUntil(OP_TIMEOUT_MS, "the ISR of " + tp + " to be 3 brokers", () -> {
                try {
                    return env.control.isr(env.topic, tp.partition()).size() == 3;
                } catch (Exception e) {
                    return false;
                }
            }, null);
        }
    }

    static List<String> errors(List<Map<String, Object>> entries) {
        return entries.stream().map(e -> Control.str(e, "error")).toList();
    }

    static List<Map<String, Object>> byClient(List<Map<String, Object>> entries, String clientId) {
        return entries.stream().filter(e -> clientId.equals(e.get("client_id"))).toList();
    }

    static String describe(List<Map<String, Object>> entries) {
        return entries.stream().map(e -> "{broker " + e.get("broker") + " v" + e.get("api_version") + " epoch "
                + e.get("producer_epoch") + " " + e.get("error") + (e.containsKey("fault") ? " fault " + e.get("fault") : "")
                + " " + e.get("answered") + "}").collect(Collectors.joining(", "));
    }

    static int otherBroker(List<Integer> candidates, int not) {
        for (int b : candidates) {
            if (b != not) {
                return b;
            }
        }
        throw new AssertionError("no broker other than " + not + " in " + candidates);
    }

    // ---- the sub-scenarios ------------------------------------------------------------------------

    /**
     * TV2 on the wire: Produce v12+ (no AddPartitionsToTxn), EndTxn v5 whose answer bumps the epoch (the
     * next transaction runs at epoch + 1), and an EndTxn answered CONCURRENT_TRANSACTIONS is retried at the
     * same epoch.
     */
    static void tv2Versions(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        String clientId = env.ctx.id(name + "-p");
        Expected committed = new Expected();
        try (KafkaProducer<String, String> p = Util.producer(txProps(env, name + "-p", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            send(env, p, name, "t1", 6, committed);
            p.commitTransaction();
            env.control.push("EndTxn", txnId, -1, "CONCURRENT_TRANSACTIONS");
            p.beginTransaction();
            send(env, p, name, "t2", 6, committed);
            p.commitTransaction();
        }
        List<Map<String, Object>> init = env.control.requests("InitProducerId", txnId);
        checkEq(List.of("NONE"), errors(init), "InitProducerId answers");
        List<Map<String, Object>> end = env.control.requests("EndTxn", txnId);
        checkEq(List.of("NONE", "CONCURRENT_TRANSACTIONS", "NONE"), errors(end), "EndTxn answers: " + describe(end));
        for (Map<String, Object> e : end) {
            checkEq(5, Control.integer(e, "api_version"), "EndTxn version (TV2): " + describe(end));
        }
        int e1 = Control.integer(end.get(0), "producer_epoch");
        checkEq(e1 + 1, Control.integer(end.get(1), "producer_epoch"),
                "the second transaction's epoch (bumped by the first EndTxn v5 answer): " + describe(end));
        checkEq(e1 + 1, Control.integer(end.get(2), "producer_epoch"),
                "the EndTxn retried after CONCURRENT_TRANSACTIONS, at the same epoch: " + describe(end));
        List<Map<String, Object>> produce = byClient(env.control.requests("Produce", txnId), clientId);
        check(!produce.isEmpty(), "no Produce request logged for %s", txnId);
        for (Map<String, Object> e : produce) {
            check(Control.integer(e, "api_version") >= 12, "Produce v%s under TV2 (want 12+): %s", e.get("api_version"), e);
            int pe = Control.integer(e, "producer_epoch");
            check(pe == e1 || pe == e1 + 1, "Produce at epoch %d, transactions ran at %d and %d", pe, e1, e1 + 1);
            checkEq("NONE", Control.str(e, "error"), "Produce answer");
        }
        List<Map<String, Object>> apt = byClient(env.control.requests("AddPartitionsToTxn", txnId), clientId);
        check(apt.isEmpty(), "the TV2 producer sent AddPartitionsToTxn: %s", describe(apt));
        env.ctx.log("%s: EndTxn %s; Produce versions %s", name, describe(end),
                produce.stream().map(e -> String.valueOf(e.get("api_version"))).distinct().toList());
        checkReadCommitted(env, name, committed);
    }

    /** FindCoordinator answered COORDINATOR_NOT_AVAILABLE, then NOT_COORDINATOR: retried, init succeeds. */
    static void findCoordinatorErrors(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        env.control.push("FindCoordinator", txnId, -1, "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR");
        Expected committed = new Expected();
        try (KafkaProducer<String, String> p = Util.producer(txProps(env, name + "-p", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            send(env, p, name, "t1", 3, committed);
            p.commitTransaction();
        }
        List<Map<String, Object>> fc = env.control.requests("FindCoordinator", txnId);
        check(fc.size() >= 3, "FindCoordinator for %s: %s", txnId, describe(fc));
        checkEq(List.of("COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "NONE"), errors(fc.subList(0, 3)),
                "FindCoordinator answers: " + describe(fc));
        checkEq(List.of("NONE"), errors(env.control.requests("InitProducerId", txnId)), "InitProducerId answers");
        checkEq(List.of("NONE"), errors(env.control.requests("EndTxn", txnId)), "EndTxn answers");
        checkReadCommitted(env, name, committed);
    }

    /** InitProducerId answered COORDINATOR_LOAD_IN_PROGRESS, then CONCURRENT_TRANSACTIONS: retried, succeeds. */
    static void initProducerIdErrors(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        env.control.push("InitProducerId", txnId, -1, "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS");
        Expected committed = new Expected();
        try (KafkaProducer<String, String> p = Util.producer(txProps(env, name + "-p", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            send(env, p, name, "t1", 3, committed);
            p.commitTransaction();
        }
        List<Map<String, Object>> init = env.control.requests("InitProducerId", txnId);
        checkEq(List.of("COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS", "NONE"), errors(init),
                "InitProducerId answers: " + describe(init));
        checkEq(List.of("NONE"), errors(env.control.requests("EndTxn", txnId)), "EndTxn answers");
        checkReadCommitted(env, name, committed);
    }

    /**
     * The commit's EndTxn answered NOT_COORDINATOR and the coordinator moved to another broker: the client
     * finds the new coordinator, which loaded the open transaction, and the commit completes there.
     */
    static void endTxnCoordinatorMoved(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        Expected committed = new Expected();
        int from;
        int to;
        try (KafkaProducer<String, String> p = Util.producer(txProps(env, name + "-p", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            send(env, p, name, "t1", 6, committed);
            p.flush();
            from = env.control.txnCoordinator(txnId);
            to = otherBroker(env.control.txnCoordinatorIsr(txnId), from);
            env.ctx.log("%s: EndTxn NOT_COORDINATOR on broker %d, coordinator %d -> %d", name, from, from, to);
            env.control.push("EndTxn", txnId, from, "NOT_COORDINATOR");
            env.control.setTxnCoordinator(txnId, to);
            checkEq(to, env.control.txnCoordinator(txnId), "the coordinator after the move");
            p.commitTransaction();
            // the producer goes on at the new coordinator
            p.beginTransaction();
            send(env, p, name, "t2", 3, committed);
            p.commitTransaction();
        }
        List<Map<String, Object>> end = env.control.requests("EndTxn", txnId);
        check(end.size() >= 3, "EndTxn for %s: %s", txnId, describe(end));
        checkEq("NOT_COORDINATOR", Control.str(end.get(0), "error"), "the first EndTxn's answer: " + describe(end));
        checkEq(from, Control.integer(end.get(0), "broker"), "the first EndTxn's broker");
        Map<String, Object> commit = end.get(end.size() - 2);
        checkEq("NONE", Control.str(commit, "error"), "the commit's last EndTxn: " + describe(end));
        checkEq(to, Control.integer(commit, "broker"), "the broker that committed: " + describe(end));
        checkEq(Control.integer(end.get(0), "producer_epoch"), Control.integer(commit, "producer_epoch"),
                "the commit retried at the same epoch: " + describe(end));
        checkEq("NONE", Control.str(end.get(end.size() - 1), "error"), "the second transaction's EndTxn");
        List<Map<String, Object>> fc = env.control.requests("FindCoordinator", txnId);
        long after = ((Number) end.get(0).get("seq")).longValue();
        check(fc.stream().anyMatch(e -> ((Number) e.get("seq")).longValue() > after),
                "no FindCoordinator after the NOT_COORDINATOR answer: %s", describe(fc));
        checkReadCommitted(env, name, committed);
    }

    /**
     * A Produce answered NOT_LEADER_OR_FOLLOWER while the partition's leader moves, in the middle of a
     * transaction: the batch goes to the new leader, and every record is written once.
     */
    static void produceLeaderChange(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        Expected committed = new Expected();
        int from;
        int to;
        try (KafkaProducer<String, String> p = Util.producer(txProps(env, name + "-p", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                String v = name + ":a-" + i;
                p.send(new ProducerRecord<>(env.topic, 0, "k", v));
                committed.add(0, v);
            }
            p.flush();
            from = env.control.leader(env.topic, 0);
            to = otherBroker(env.control.isr(env.topic, 0), from);
            env.ctx.log("%s: Produce NOT_LEADER_OR_FOLLOWER on broker %d, leader %d -> %d", name, from, from, to);
            env.control.addRule("{\"api\":\"Produce\",\"topic\":" + Control.Json.quote(env.topic)
                    + ",\"partition\":0,\"transactional_id\":" + Control.Json.quote(txnId) + ",\"broker\":" + from
                    + ",\"errors\":[\"NOT_LEADER_OR_FOLLOWER\"]}");
            env.control.setLeader(env.topic, 0, to);
            for (int i = 0; i < 5; i++) {
                String v = name + ":b-" + i;
                p.send(new ProducerRecord<>(env.topic, 0, "k", v)).get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                committed.add(0, v);
            }
            p.commitTransaction();
        }
        List<Map<String, Object>> produce = env.control.requests("Produce", txnId);
        List<String> errs = errors(produce);
        int failedAt = errs.indexOf("NOT_LEADER_OR_FOLLOWER");
        check(failedAt >= 0, "no Produce answered NOT_LEADER_OR_FOLLOWER: %s", describe(produce));
        checkEq(from, Control.integer(produce.get(failedAt), "broker"), "the broker that refused the Produce");
        List<Map<String, Object>> later = produce.subList(failedAt + 1, produce.size());
        check(!later.isEmpty() && later.stream().allMatch(e -> Control.integer(e, "broker") == to
                && "NONE".equals(e.get("error"))), "the Produce after the leader change: %s", describe(produce));
        checkEq(List.of("NONE"), errors(env.control.requests("EndTxn", txnId)), "EndTxn answers");
        checkReadCommitted(env, name, committed);
    }

    /**
     * The coordinator answers the commit's EndTxn after longer than the client's request.timeout.ms (a
     * slow answer: the commit was carried out): the client times the request out, retries it at the same
     * epoch, the coordinator answers the retry as the completed commit with the bumped epoch, and the
     * producer's next transaction commits at that epoch. The transaction is committed once.
     */
    static void endTxnTimeoutRetry(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        Expected committed = new Expected();
        Properties props = txProps(env, name + "-p", txnId);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "2000");
        long took;
        try (KafkaProducer<String, String> p = Util.producer(props)) {
            p.initTransactions();
            p.beginTransaction();
            send(env, p, name, "t1", 6, committed);
            p.flush();
            env.control.push("EndTxn", txnId, -1, "{\"error\":\"NONE\",\"delay_ms\":4000}");
            long t0 = System.nanoTime();
            p.commitTransaction();
            took = (System.nanoTime() - t0) / 1_000_000;
            p.beginTransaction();
            send(env, p, name, "t2", 3, committed);
            p.commitTransaction();
        }
        check(took >= 1500, "the commit took %d ms: the slow answer was not waited for", took);
        List<Map<String, Object>> end = env.control.requests("EndTxn", txnId);
        env.ctx.log("%s: commit took %d ms; EndTxn %s", name, took, describe(end));
        check(end.size() >= 3, "EndTxn for %s: want the slow one, its retry and the next transaction's: %s",
                txnId, describe(end));
        check(String.valueOf(end.get(0).get("fault")).startsWith("delay"), "the first EndTxn was not the slow one: %s",
                describe(end));
        int e1 = Control.integer(end.get(0), "producer_epoch");
        List<Map<String, Object>> retries = end.subList(1, end.size() - 1);
        for (Map<String, Object> r : retries) {
            checkEq(e1, Control.integer(r, "producer_epoch"), "the retried EndTxn's epoch: " + describe(end));
        }
        checkEq("NONE", Control.str(retries.get(retries.size() - 1), "error"), "the retried EndTxn's answer: " + describe(end));
        Map<String, Object> next = end.get(end.size() - 1);
        checkEq(e1 + 1, Control.integer(next, "producer_epoch"), "the next transaction's epoch: " + describe(end));
        checkEq("NONE", Control.str(next, "error"), "the next transaction's EndTxn: " + describe(end));
        checkReadCommitted(env, name, committed);
    }

    /**
     * Zombie fencing: a second producer with the same transactional.id initializes while the first has an
     * open transaction; the first's commit fails with ProducerFencedException (EndTxn answered
     * PRODUCER_FENCED), its records are aborted, and its next send fails too. The new producer commits.
     */
    static void zombieFenced(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        Expected committed = new Expected();
        KafkaProducer<String, String> zombie = Util.producer(txProps(env, name + "-zombie", txnId));
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            send(env, zombie, name, "zombie", 6, null);
            zombie.flush();
            try (KafkaProducer<String, String> p2 = Util.producer(txProps(env, name + "-new", txnId))) {
                p2.initTransactions();
                try {
                    zombie.commitTransaction();
                    throw new AssertionError("the fenced producer committed");
                } catch (ProducerFencedException e) {
                    env.ctx.log("%s: commit failed as expected: %s", name, e);
                }
                try {
                    zombie.send(new ProducerRecord<>(env.topic, 0, "k", name + ":zombie-after")).get(OP_TIMEOUT_MS,
                            TimeUnit.MILLISECONDS);
                    throw new AssertionError("the fenced producer sent a record");
                } catch (Exception e) {
                    check(Util.causedBy(e, ProducerFencedException.class), "the fenced producer's send failed with %s", e);
                }
                p2.beginTransaction();
                send(env, p2, name, "new", 3, committed);
                p2.commitTransaction();
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        String zombieId = env.ctx.id(name + "-zombie");
        List<Map<String, Object>> end = env.control.requests("EndTxn", txnId);
        List<Map<String, Object>> zEnd = byClient(end, zombieId);
        checkEq(List.of("PRODUCER_FENCED"), errors(zEnd), "the zombie's EndTxn answers: " + describe(end));
        checkEq(List.of("NONE"), errors(byClient(end, env.ctx.id(name + "-new"))), "the new producer's EndTxn answers");
        List<Map<String, Object>> init = byClient(env.control.requests("InitProducerId", txnId), env.ctx.id(name + "-new"));
        checkEq("NONE", Control.str(init.get(init.size() - 1), "error"), "the new producer's init: " + describe(init));
        checkReadCommitted(env, name, committed);
    }

    /**
     * The transaction coordinator's broker goes down mid-transaction: its __transaction_state partition and
     * the data partitions it led fail over; the producer sends on and commits through the new coordinator;
     * the broker comes back and the producer's next transaction commits too. Exactly once.
     */
    static void coordinatorDown(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        Expected committed = new Expected();
        int down;
        try (KafkaProducer<String, String> p = Util.producer(txProps(env, name + "-p", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            send(env, p, name, "a", 6, committed);
            p.flush();
            down = env.control.txnCoordinator(txnId);
            env.ctx.log("%s: coordinator broker %d down", name, down);
            int downed = down;
            env.control.whileDown(down, () -> {
                send(env, p, name, "b", 6, committed);
                p.commitTransaction();
                int now = env.control.txnCoordinator(txnId);
                check(now != downed, "the coordinator is still the downed broker %d", downed);
            });
            waitFullIsr(env);
            p.beginTransaction();
            send(env, p, name, "c", 3, committed);
            p.commitTransaction();
        }
        List<Map<String, Object>> end = env.control.requests("EndTxn", txnId);
        check(end.size() >= 2, "EndTxn for %s: %s", txnId, describe(end));
        env.ctx.log("%s: EndTxn %s", name, describe(end));
        List<Map<String, Object>> ok = end.stream().filter(e -> "NONE".equals(e.get("error"))).toList();
        checkEq(2, ok.size(), "EndTxn answered NONE (one per transaction): " + describe(end));
        check(Control.integer(ok.get(0), "broker") != down, "the commit was answered by the downed broker %d: %s",
                down, describe(end));
        checkReadCommitted(env, name, committed);
    }

    /**
     * Zombie fencing through a send: after the new producer initialized, the zombie's next record (to a
     * partition its transaction had not written) is refused (the partition's leader verifies it with the
     * coordinator, KIP-890: INVALID_PRODUCER_EPOCH, as Kafka maps PRODUCER_FENCED for produce), and
     * its abort fails with ProducerFencedException. Nothing of the zombie is visible.
     */
    static void zombieSendFenced(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        String zombieId = env.ctx.id(name + "-zombie");
        Expected committed = new Expected();
        KafkaProducer<String, String> zombie = Util.producer(txProps(env, name + "-zombie", txnId));
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            for (int i = 0; i < 3; i++) {
                zombie.send(new ProducerRecord<>(env.topic, 0, "k", name + ":zombie-" + i));
            }
            zombie.flush();
            try (KafkaProducer<String, String> p2 = Util.producer(txProps(env, name + "-new", txnId))) {
                p2.initTransactions();
                long since = lastSeq(env.control.requests("Produce", txnId));
                try {
                    zombie.send(new ProducerRecord<>(env.topic, 1, "k", name + ":zombie-late"))
                            .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    throw new AssertionError("the fenced producer's record was acknowledged");
                } catch (ExecutionException e) {
                    check(Util.causedBy(e, InvalidProducerEpochException.class, ProducerFencedException.class),
                            "the fenced producer's send failed with %s", e.getCause());
                    env.ctx.log("%s: the zombie's send failed as expected: %s", name, e.getCause());
                }
                try {
                    zombie.abortTransaction();
                    throw new AssertionError("the fenced producer aborted its transaction");
                } catch (ProducerFencedException e) {
                    env.ctx.log("%s: the zombie's abort failed as expected: %s", name, e);
                }
                List<Map<String, Object>> late = byClient(env.control.requests("Produce", txnId), zombieId).stream()
                        .filter(e -> ((Number) e.get("seq")).longValue() > since).toList();
                check(!late.isEmpty(), "the zombie's late Produce was not logged");
                checkEq("INVALID_PRODUCER_EPOCH", Control.str(late.get(0), "error"),
                        "the zombie's late Produce (KIP-890 verification of a fenced epoch): " + describe(late));
                p2.beginTransaction();
                send(env, p2, name, "new", 3, committed);
                p2.commitTransaction();
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        List<Map<String, Object>> zEnd = byClient(env.control.requests("EndTxn", txnId), zombieId);
        checkEq(List.of("PRODUCER_FENCED"), errors(zEnd), "the zombie's EndTxn (abort) answers: " + describe(zEnd));
        checkReadCommitted(env, name, committed);
    }

    /**
     * The coordinator's broker goes down while the commit's EndTxn answer is on its way (the commit was
     * carried out, its answer held): the client loses the connection, finds the new coordinator, which
     * loaded the transaction from __transaction_state and answers the retried EndTxn (same epoch) as the
     * commit it completed. The producer goes on at the bumped epoch. Committed once.
     */
    static void coordinatorDownDuringCommit(Env env, String name) throws Exception {
        String txnId = env.ctx.id(name);
        Expected committed = new Expected();
        int down;
        try (KafkaProducer<String, String> p = Util.producer(txProps(env, name + "-p", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            send(env, p, name, "t1", 6, committed);
            p.flush();
            down = env.control.txnCoordinator(txnId);
            env.control.push("EndTxn", txnId, down, "{\"error\":\"NONE\",\"delay_ms\":5000}");
            CompletableFuture<Void> commit = CompletableFuture.runAsync(p::commitTransaction);
            Util.waitUntil(OP_TIMEOUT_MS, "the EndTxn to reach broker " + down, () -> {
                try {
                    return !env.control.requests("EndTxn", txnId).isEmpty();
                } catch (Exception e) {
                    return false;
                }
            }, null);
            env.ctx.log("%s: EndTxn held on broker %d; taking it down", name, down);
            int downed = down;
            env.control.whileDown(down, () -> {
                commit.get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                check(env.control.txnCoordinator(txnId) != downed, "the coordinator is still the downed broker %d", downed);
            });
            waitFullIsr(env);
            p.beginTransaction();
            send(env, p, name, "t2", 3, committed);
            p.commitTransaction();
        }
        List<Map<String, Object>> end = env.control.requests("EndTxn", txnId);
        env.ctx.log("%s: EndTxn %s", name, describe(end));
        check(end.size() >= 3, "EndTxn for %s: %s", txnId, describe(end));
        checkEq(down, Control.integer(end.get(0), "broker"), "the held EndTxn's broker");
        int e1 = Control.integer(end.get(0), "producer_epoch");
        Map<String, Object> retry = end.get(end.size() - 2);
        checkEq("NONE", Control.str(retry, "error"), "the retried commit's answer: " + describe(end));
        check(Control.integer(retry, "broker") != down, "the retry answered by the downed broker: %s", describe(end));
        checkEq(e1, Control.integer(retry, "producer_epoch"), "the retried commit's epoch: " + describe(end));
        Map<String, Object> next = end.get(end.size() - 1);
        checkEq(e1 + 1, Control.integer(next, "producer_epoch"), "the next transaction's epoch: " + describe(end));
        checkEq("NONE", Control.str(next, "error"), "the next transaction's EndTxn: " + describe(end));
        checkReadCommitted(env, name, committed);
    }

    /** The seq of the newest of these request log entries (0: none). */
    static long lastSeq(List<Map<String, Object>> entries) {
        return entries.stream().mapToLong(e -> ((Number) e.get("seq")).longValue()).max().orElse(0);
    }
}
