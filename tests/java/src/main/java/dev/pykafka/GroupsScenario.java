package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;

/**
 * Classic consumer group: 3 consumers on a 6-partition topic get 2 partitions each, consume and commit;
 * one leaves, the other two take over its partitions and resume from the committed offsets (no record
 * twice, none lost); the group's offsets and description are checked with Admin.
 */
final class GroupsScenario {
    private GroupsScenario() {}

    static final int PARTITIONS = 6;
    static final int PER_PHASE = 50; // records per partition per phase

    /** One member: its consumer, its current assignment and what it consumed. */
    static final class Member implements ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final Set<TopicPartition> assigned = new HashSet<>();
        int rebalances;

        Member(Ctx ctx, String name, String group) {
            this.name = name;
            this.consumer = new KafkaConsumer<>(Util.consumerProps(ctx, name, group, "read_uncommitted"));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            assigned.removeAll(partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned.addAll(partitions);
            rebalances++;
        }

        /** One poll; records are checked against the assignment, then committed synchronously. */
        List<ConsumerRecord<String, String>> pollAndCommit() {
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                check(assigned.contains(tp), "%s got a record of %s but is assigned %s", name, tp, assigned);
                got.add(r);
                offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
            }
            if (!offsets.isEmpty()) {
                consumer.commitSync(offsets, Duration.ofMillis(OP_TIMEOUT_MS));
            }
            return got;
        }

        @Override
        public String toString() {
            return name + assigned.stream().map(tp -> Integer.toString(tp.partition())).sorted().toList();
        }
    }

    static void run(Ctx ctx) throws Exception {
        String topic = ctx.id("t");
        String group = ctx.id("group");
        List<TopicPartition> tps = Util.partitions(topic, PARTITIONS);
        ctx.step("createTopics %s", topic);
        try (Admin admin = Util.admin(ctx)) {
            Util.createTopics(admin, Map.of(topic, PARTITIONS));
        }
        List<Member> members = new ArrayList<>();
        try (KafkaProducer<String, String> producer = Util.producer(Util.producerProps(ctx, "producer"));
             Admin admin = Util.admin(ctx)) {
            for (int i = 1; i <= 3; i++) {
                Member m = new Member(ctx, "c" + i, group);
                m.consumer.subscribe(List.of(topic), m);
                members.add(m);
            }

            ctx.step("phase 1: three members join, two partitions each");
            awaitBalanced(ctx, members, 2);
            produce(producer, topic, 0);
            ctx.step("phase 1: consume and commit");
            Map<String, Set<String>> seen1 = consume(ctx, members, PARTITIONS * PER_PHASE);
            checkPhase(seen1, 0, members);
            ctx.log("phase 1: %s consumed %d records", members, PARTITIONS * PER_PHASE);
            checkCommitted(admin, group, tps, PER_PHASE);

            ctx.step("describeConsumerGroups / listGroups");
            ConsumerGroupDescription desc = admin.describeConsumerGroups(List.of(group)).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(group);
            checkEq(GroupState.STABLE, desc.groupState(), "group state with 3 members");
            checkEq(3, desc.members().size(), "group members");
            Set<TopicPartition> described = new HashSet<>();
            desc.members().forEach(md -> described.addAll(md.assignment().topicPartitions()));
            checkEq(Set.copyOf(tps), described, "partitions assigned per describeConsumerGroups");
            Collection<GroupListing> groups = admin.listGroups().all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            check(groups.stream().anyMatch(g -> g.groupId().equals(group)), "listGroups lacks %s: %s", group, groups);

            ctx.step("phase 2: c3 leaves, c1 and c2 rebalance");
            Member gone = members.remove(2);
            Set<TopicPartition> orphaned = Set.copyOf(gone.assigned);
            gone.consumer.close(); // LeaveGroup
            ctx.log("%s left the group", gone.name);
            awaitBalanced(ctx, members, 3);
            check(members.stream().allMatch(m -> m.rebalances >= 2), "expected a second assignment for %s", members);
            produce(producer, topic, PER_PHASE);
            ctx.step("phase 2: consume from the committed offsets");
            Map<String, Set<String>> seen2 = consume(ctx, members, PARTITIONS * PER_PHASE);
            checkPhase(seen2, PER_PHASE, members);
            ctx.log("phase 2: %s consumed %d records (took over %s)", members, PARTITIONS * PER_PHASE, orphaned);
            checkCommitted(admin, group, tps, 2 * PER_PHASE);

            ctx.step("all leave: group becomes Empty");
            for (Member m : members) {
                m.consumer.close();
            }
            members.clear();
            Util.waitUntil(OP_TIMEOUT_MS, "group to become Empty", () -> {
                try {
                    return admin.describeConsumerGroups(List.of(group)).all().get().get(group).groupState()
                            == GroupState.EMPTY;
                } catch (Exception e) {
                    return false;
                }
            }, () -> {
                try {
                    return admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                } catch (Exception e) {
                    return e;
                }
            });
            checkCommitted(admin, group, tps, 2 * PER_PHASE);
        } finally {
            for (Member m : members) {
                m.consumer.close(Duration.ofSeconds(5));
            }
        }
    }

    static void produce(KafkaProducer<String, String> producer, String topic, int from) {
        for (int i = from; i < from + PER_PHASE; i++) {
            for (int p = 0; p < PARTITIONS; p++) {
                producer.send(new ProducerRecord<>(topic, p, "k" + i, p + ":" + i));
            }
        }
        producer.flush();
    }

    /** Polls every member in turn until each has {@code each} partitions and together they cover all. */
    static void awaitBalanced(Ctx ctx, List<Member> members, int each) throws Exception {
        long deadline = System.currentTimeMillis() + 45_000;
        while (true) {
            for (Member m : members) {
                List<ConsumerRecord<String, String>> got = m.pollAndCommit();
                check(got.isEmpty(), "%s consumed %d records before anything was produced", m.name, got.size());
            }
            Set<TopicPartition> union = new HashSet<>();
            int total = 0;
            boolean sizes = true;
            for (Member m : members) {
                union.addAll(m.assigned);
                total += m.assigned.size();
                sizes &= m.assigned.size() == each;
            }
            if (sizes && total == PARTITIONS && union.size() == PARTITIONS) {
                ctx.log("balanced: %s", members);
                return;
            }
            check(System.currentTimeMillis() < deadline, "group did not balance to %d partitions each: %s", each, members);
        }
    }

    /** Polls all members until {@code n} records arrived (member name -> "partition:i" values). */
    static Map<String, Set<String>> consume(Ctx ctx, List<Member> members, int n) {
        Map<String, Set<String>> seen = new HashMap<>();
        Set<String> all = new HashSet<>();
        long deadline = System.currentTimeMillis() + 45_000;
        while (all.size() < n) {
            check(System.currentTimeMillis() < deadline, "consumed only %d of %d records", all.size(), n);
            for (Member m : members) {
                for (ConsumerRecord<String, String> r : m.pollAndCommit()) {
                    checkEq(r.partition() + ":" + r.key().substring(1), r.value(), "record value");
                    check(all.add(r.value()), "record %s consumed twice (second time by %s)", r.value(), m.name);
                    seen.computeIfAbsent(m.name, k -> new HashSet<>()).add(r.value());
                }
            }
        }
        // nothing more must arrive
        long until = System.currentTimeMillis() + 1000;
        while (System.currentTimeMillis() < until) {
            for (Member m : members) {
                List<ConsumerRecord<String, String>> extra = m.pollAndCommit();
                check(extra.isEmpty(), "%s got %d unexpected extra records, first %s", m.name, extra.size(),
                        extra.isEmpty() ? null : extra.get(0).value());
            }
        }
        return seen;
    }

    /** Each member consumed exactly the records [from, from+PER_PHASE) of the partitions it owns. */
    static void checkPhase(Map<String, Set<String>> seen, int from, List<Member> members) {
        for (Member m : members) {
            Set<String> expected = new HashSet<>();
            for (TopicPartition tp : m.assigned) {
                for (int i = from; i < from + PER_PHASE; i++) {
                    expected.add(tp.partition() + ":" + i);
                }
            }
            Set<String> got = seen.getOrDefault(m.name, Set.of());
            if (!expected.equals(got)) {
                Set<String> missing = new HashSet<>(expected);
                missing.removeAll(got);
                Set<String> extra = new HashSet<>(got);
                extra.removeAll(expected);
                throw new AssertionError(m + " consumed the wrong records; missing " + sample(missing)
                        + " unexpected " + sample(extra));
            }
        }
    }

    static String sample(Set<String> s) {
        return s.size() + " " + s.stream().sorted().limit(10).collect(Collectors.toList());
    }

    static void checkCommitted(Admin admin, String group, List<TopicPartition> tps, long expected) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        for (TopicPartition tp : tps) {
            check(offs.get(tp) != null, "no committed offset for %s: %s", tp, offs);
            checkEq(expected, offs.get(tp).offset(), "committed offset of " + tp);
        }
    }
}
