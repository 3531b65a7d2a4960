package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;

/**
 * KIP-848 consumer groups ({@code group.protocol=consumer}: ConsumerGroupHeartbeat, the broker assigns).
 *
 * <ol>
 *   <li>Two consumers of one group (the broker's default assignor) and, at the same time, two of a second
 *       group with {@code group.remote.assignor=range} split a 6-partition topic: per group the
 *       assignments are disjoint and cover every partition, range gives contiguous halves.</li>
 *   <li>Admin.describeConsumerGroups: type CONSUMER, state STABLE, the two members (their member ids, the
 *       assignments the consumers report, epochs), and the assignor named "range" for the second group.</li>
 *   <li>Records produced after the split are consumed (commitSync after each poll) exactly once, each by the
 *       owner of its partition; the committed offsets are the end offsets.</li>
 *   <li>More records are produced, then one consumer closes without reading them: the other takes over
 *       every partition and continues from the committed offsets, no record twice and none lost.</li>
 *   <li>A read_committed consumer of a third group in a consume-transform-produce loop commits its offsets
 *       through sendOffsetsToTransaction(offsets, consumer.groupMetadata()) (member id and epoch); one
 *       batch is aborted and reprocessed; the output holds each input once.</li>
 * </ol>
 */
final class ConsumerProtocolScenario {
    private ConsumerProtocolScenario() {}

    static final int PARTITIONS = 6;
    static final int PER_PHASE = 30; // records per partition per phase
    static final long BALANCE_MS = 40_000;

    /** A consumer with group.protocol=consumer (no session/heartbeat settings: the broker owns those). */
    static KafkaConsumer<String, String> consumer(Ctx ctx, String name, String group, String isolation,
                                                  String assignor, int maxPollRecords) {
        Properties p = Util.consumerProps(ctx, name, null, isolation);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(maxPollRecords));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        if (assignor != null) {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }
        return new KafkaConsumer<>(p);
    }

    /** One member: its consumer and the records it consumed ("partition:i" values). */
    static final class Member {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final List<String> consumed = new ArrayList<>();
        boolean closed;

        Member(Ctx ctx, String name, String group, String assignor) {
            this.name = name;
            this.consumer = consumer(ctx, name, group, "read_uncommitted", assignor, 500);
        }

        Set<Integer> partitions() {
            Set<Integer> s = new TreeSet<>();
            consumer.assignment().forEach(tp -> s.add(tp.partition()));
            return s;
        }

        /** One poll; each record must be of an assigned partition; commitSync of what it returned. */
        int pollAndCommit() {
            ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(100));
            Set<TopicPartition> assigned = consumer.assignment();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : recs) {
                TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                check(assigned.contains(tp), "%s got a record of %s but is assigned %s", name, tp, assigned);
                checkEq(r.partition() + ":" + r.key().substring(1), r.value(), "record value");
                consumed.add(r.value());
                offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
            }
            if (!offsets.isEmpty()) {
                consumer.commitSync(offsets, Duration.ofMillis(OP_TIMEOUT_MS));
            }
            return recs.count();
        }

        void close() {
            if (!closed) {
                closed = true;
                consumer.close(Duration.ofSeconds(10));
            }
        }

        @Override
        public String toString() {
            return name + partitions();
        }
    }

    static void run(Ctx ctx) throws Exception {
        String topic = ctx.id("t");
        String out = ctx.id("out");
        String group = ctx.id("group");
        String rangeGroup = ctx.id("range");
        List<TopicPartition> tps = Util.partitions(topic, PARTITIONS);
        ctx.step("createTopics %s, %s", topic, out);
        try (Admin admin = Util.admin(ctx)) {
            Util.createTopics(admin, Map.of(topic, PARTITIONS, out, PARTITIONS));
        }
        List<Member> all = new ArrayList<>();
        try (KafkaProducer<String, String> producer = Util.producer(Util.producerProps(ctx, "producer"));
             Admin admin = Util.admin(ctx)) {
            Member c1 = new Member(ctx, "c1", group, null);
            Member c2 = new Member(ctx, "c2", group, null);
            Member r1 = new Member(ctx, "r1", rangeGroup, "range");
            Member r2 = new Member(ctx, "r2", rangeGroup, "range");
            all.addAll(List.of(c1, c2, r1, r2));
            for (Member m : all) {
                m.consumer.subscribe(List.of(topic));
            }

            ctx.step("two groups of two members split %d partitions", PARTITIONS);
            long t0 = System.currentTimeMillis();
            awaitSplit(ctx, List.of(c1, c2), List.of(r1, r2));
            ctx.log("split after %d ms: %s %s", System.currentTimeMillis() - t0, all, epochs(all));
            for (Member r : List.of(r1, r2)) {
                Set<Integer> ps = r.partitions();
                int lo = ps.iterator().next();
                check(ps.size() == PARTITIONS / 2 && ps.equals(range(lo, lo + PARTITIONS / 2)),
                        "range assignor: %s is not half of the partitions in one contiguous range", r);
            }

            ctx.step("describeConsumerGroups %s, %s", group, rangeGroup);
            Map<String, ConsumerGroupDescription> descs = admin.describeConsumerGroups(List.of(group, rangeGroup))
                    .all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            checkDescription(ctx, descs.get(group), List.of(c1, c2));
            checkDescription(ctx, descs.get(rangeGroup), List.of(r1, r2));
            checkEq("range", descs.get(rangeGroup).partitionAssignor(), "assignor of " + rangeGroup);
            ctx.log("%s uses assignor %s", group, descs.get(group).partitionAssignor());
            r1.close();
            r2.close();

            ctx.step("phase 1: consume and commit");
            produce(producer, topic, 0);
            consume(ctx, List.of(c1, c2), PARTITIONS * PER_PHASE);
            for (Member m : List.of(c1, c2)) {
                Set<String> expected = values(m.partitions(), 0);
                checkEq(expected, new HashSet<>(m.consumed), m.name + " consumed exactly its partitions' records");
            }
            checkCommitted(admin, group, tps, PER_PHASE);

            ctx.step("phase 2: c2 closes with records unread; c1 takes over from the committed offsets");
            produce(producer, topic, PER_PHASE);
            Set<Integer> c2Had = c2.partitions();
            c1.consumed.clear();
            c2.close();
            ctx.log("c2 left (had %s)", c2Had);
            long t1 = System.currentTimeMillis();
            long deadline = t1 + BALANCE_MS;
            Set<String> expected2 = values(range(0, PARTITIONS), PER_PHASE);
            while (c1.partitions().size() < PARTITIONS || c1.consumed.size() < expected2.size()) {
                check(System.currentTimeMillis() < deadline, "c1 did not take over: %s consumed %d of %d",
                        c1, c1.consumed.size(), expected2.size());
                c1.pollAndCommit();
            }
            ctx.log("c1 has all partitions and %d records after %d ms (epoch %d)", c1.consumed.size(),
                    System.currentTimeMillis() - t1, c1.consumer.groupMetadata().generationId());
            settle(List.of(c1));
            check(c1.consumed.size() == new HashSet<>(c1.consumed).size(), "c1 consumed duplicates: %s",
                    duplicates(c1.consumed));
            checkEq(expected2, new HashSet<>(c1.consumed), "phase 2 records consumed by c1");
            checkCommitted(admin, group, tps, 2 * PER_PHASE);

            ctx.step("describe after the takeover");
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(group);
            checkDescription(ctx, d, List.of(c1));
            c1.close();
        } finally {
            for (Member m : all) {
                m.close();
            }
        }

        consumeTransformProduce(ctx, topic, out);
    }

    /** Polls all members until each group's assignments are disjoint, non-empty and cover the topic. */
    static void awaitSplit(Ctx ctx, List<Member> g1, List<Member> g2) {
        long deadline = System.currentTimeMillis() + BALANCE_MS;
        List<String> seen = new ArrayList<>();
        while (true) {
            for (Member m : g1) {
                checkEq(0, m.pollAndCommit(), m.name + " records before anything was produced");
            }
            for (Member m : g2) {
                checkEq(0, m.pollAndCommit(), m.name + " records before anything was produced");
            }
            String now = g1 + " " + g2;
            if (seen.isEmpty() || !seen.get(seen.size() - 1).equals(now)) {
                seen.add(now);
                ctx.log("assignments: %s", now);
            }
            if (split(g1) && split(g2)) {
                return;
            }
            check(System.currentTimeMillis() < deadline, "groups did not split the partitions: %s", seen);
        }
    }

    static boolean split(List<Member> members) {
        Set<Integer> union = new HashSet<>();
        int total = 0;
        for (Member m : members) {
            Set<Integer> ps = m.partitions();
            if (ps.isEmpty()) {
                return false;
            }
            union.addAll(ps);
            total += ps.size();
        }
        return total == PARTITIONS && union.size() == PARTITIONS;
    }

    static void checkDescription(Ctx ctx, ConsumerGroupDescription d, List<Member> members) {
        check(d != null, "no description");
        ctx.log("described %s: type %s state %s assignor %s groupEpoch %s targetAssignmentEpoch %s members %s",
                d.groupId(), d.type(), d.groupState(), d.partitionAssignor(), d.groupEpoch(),
                d.targetAssignmentEpoch(), d.members());
        checkEq(GroupType.CONSUMER, d.type(), "type of " + d.groupId());
        checkEq(GroupState.STABLE, d.groupState(), "state of " + d.groupId());
        check(!d.isSimpleConsumerGroup(), "%s described as a simple group", d.groupId());
        checkEq(members.size(), d.members().size(), "members of " + d.groupId());
        Map<String, Member> byId = new HashMap<>();
        for (Member m : members) {
            byId.put(m.consumer.groupMetadata().memberId(), m);
        }
        for (MemberDescription md : d.members()) {
            Member m = byId.get(md.consumerId());
            check(m != null, "described member %s is none of %s", md.consumerId(), byId.keySet());
            checkEq(m.consumer.assignment(), md.assignment().topicPartitions(), "described assignment of " + m.name);
            md.targetAssignment().ifPresent(t -> checkEq(m.consumer.assignment(), t.topicPartitions(),
                    "described target assignment of " + m.name));
            check(md.memberEpoch().isPresent() && md.memberEpoch().get() > 0, "member epoch of %s: %s",
                    m.name, md.memberEpoch());
            checkEq(m.consumer.groupMetadata().generationId(), md.memberEpoch().get(),
                    "described member epoch vs groupMetadata().generationId() of " + m.name);
            check(md.clientId().endsWith(m.name + "-" + ctx.suffix), "client id of %s: %s", m.name,
                    md.clientId());
        }
        check(d.groupEpoch().isPresent() && d.targetAssignmentEpoch().isPresent()
                        && d.groupEpoch().get() >= d.targetAssignmentEpoch().get(),
                "group epoch %s / target assignment epoch %s", d.groupEpoch(), d.targetAssignmentEpoch());
    }

    static Set<Integer> range(int from, int to) {
        Set<Integer> s = new TreeSet<>();
        for (int i = from; i < to; i++) {
            s.add(i);
        }
        return s;
    }

    static Set<String> values(Set<Integer> partitions, int from) {
        Set<String> s = new HashSet<>();
        for (int p : partitions) {
            for (int i = from; i < from + PER_PHASE; i++) {
                s.add(p + ":" + i);
            }
        }
        return s;
    }

    static List<String> duplicates(List<String> l) {
        Set<String> once = new HashSet<>();
        List<String> dup = new ArrayList<>();
        for (String v : l) {
            if (!once.add(v)) {
                dup.add(v);
            }
        }
        return dup.subList(0, Math.min(10, dup.size()));
    }

    static Map<Integer, Integer> epochs(List<Member> members) {
        Map<Integer, Integer> m = new HashMap<>();
        for (int i = 0; i < members.size(); i++) {
            m.put(i + 1, members.get(i).consumer.groupMetadata().generationId());
        }
        return m;
    }

    static void produce(KafkaProducer<String, String> producer, String topic, int from) {
        for (int i = from; i < from + PER_PHASE; i++) {
            for (int p = 0; p < PARTITIONS; p++) {
                producer.send(new ProducerRecord<>(topic, p, "k" + i, p + ":" + i));
            }
        }
        producer.flush();
    }

    /** Polls the members until n records arrived in all, none twice; then checks nothing more comes. */
    static void consume(Ctx ctx, List<Member> members, int n) {
        long deadline = System.currentTimeMillis() + BALANCE_MS;
        Set<String> all = new HashSet<>();
        while (true) {
            all.clear();
            int total = 0;
            for (Member m : members) {
                all.addAll(m.consumed);
                total += m.consumed.size();
            }
            check(total == all.size(), "records consumed twice: %s", members);
            if (total >= n) {
                break;
            }
            check(System.currentTimeMillis() < deadline, "consumed only %d of %d records", total, n);
            for (Member m : members) {
                m.pollAndCommit();
            }
        }
        settle(members);
        ctx.log("consumed %d records: %s", n, members);
    }

    /** Nothing more arrives for a second. */
    static void settle(List<Member> members) {
        long until = System.currentTimeMillis() + 1000;
        while (System.currentTimeMillis() < until) {
            for (Member m : members) {
                checkEq(0, m.pollAndCommit(), m.name + " unexpected extra records");
            }
        }
    }

    static void checkCommitted(Admin admin, String group, List<TopicPartition> tps, long expected) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        for (TopicPartition tp : tps) {
            check(offs.get(tp) != null, "no committed offset for %s: %s", tp, offs);
            checkEq(expected, offs.get(tp).offset(), "committed offset of " + tp);
        }
    }

    /** read_committed consumer (group.protocol=consumer) + transactional producer; one batch aborted. */
    static void consumeTransformProduce(Ctx ctx, String in, String out) throws Exception {
        String group = ctx.id("eos");
        List<TopicPartition> inTps = Util.partitions(in, PARTITIONS);
        List<TopicPartition> outTps = Util.partitions(out, PARTITIONS);
        long perPartition = 2L * PER_PHASE;
        Properties pp = Util.producerProps(ctx, "eos-producer");
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, ctx.id("txn"));
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        int commits = 0;
        int aborts = 0;
        Map<TopicPartition, Long> done = new HashMap<>();
        ctx.step("consume-transform-produce (read_committed, group.protocol=consumer)");
        try (KafkaConsumer<String, String> consumer = consumer(ctx, "eos-consumer", group, "read_committed", null, 40);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            consumer.subscribe(List.of(in));
            producer.initTransactions();
            long deadline = System.currentTimeMillis() + BALANCE_MS;
            while (inTps.stream().anyMatch(tp -> done.getOrDefault(tp, 0L) < perPartition)) {
                check(System.currentTimeMillis() < deadline, "did not finish: committed %s (%d commits, %d aborts)",
                        done, commits, aborts);
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : recs.partitions()) {
                    List<ConsumerRecord<String, String>> l = recs.records(tp);
                    for (ConsumerRecord<String, String> r : l) {
                        producer.send(new ProducerRecord<>(out, r.partition(), r.key(), "out:" + r.value()));
                    }
                    offsets.put(tp, new OffsetAndMetadata(l.get(l.size() - 1).offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (aborts == 0 && commits == 1) {
                    producer.flush();
                    producer.abortTransaction();
                    aborts++;
                    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata om = committed.get(tp);
                        if (om == null) {
                            consumer.seekToBeginning(Set.of(tp));
                        } else {
                            consumer.seek(tp, om.offset());
                        }
                    }
                    ctx.log("aborted a batch of %d records; rewound to %s", recs.count(), committed);
                } else {
                    producer.commitTransaction();
                    commits++;
                    offsets.forEach((tp, om) -> done.put(tp, om.offset()));
                }
            }
            ctx.log("processed in %d committed transactions, %d aborted; groupMetadata %s", commits, aborts,
                    consumer.groupMetadata());
            check(aborts == 1, "expected one aborted batch, got %d", aborts);
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.copyOf(inTps),
                    Duration.ofMillis(OP_TIMEOUT_MS));
            for (TopicPartition tp : inTps) {
                check(committed.get(tp) != null, "no committed offset for %s", tp);
                checkEq(perPartition, committed.get(tp).offset(), "consumer.committed(" + tp + ")");
            }
        }
        ctx.step("check the transformed output");
        Util.awaitStable(ctx, outTps);
        Util.Drained rc = Util.drain(ctx, outTps, "read_committed", 30_000);
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < perPartition; i++) {
                expected.add("out:" + p + ":" + i);
            }
            checkEq(expected, rc.values(outTps.get(p)), "read_committed output of " + outTps.get(p));
        }
        ctx.log("output verified: %d records", rc.count());
    }
}
