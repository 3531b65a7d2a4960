package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/** describeCluster; create / list / describe topics; describeConfigs (topic + broker); delete topics. */
final class AdminScenario {
    private AdminScenario() {}

    static void run(Ctx ctx) throws Exception {
        String t1 = ctx.id("t1");
        String t2 = ctx.id("t2");
        try (Admin admin = Util.admin(ctx)) {
            ctx.step("describeCluster");
            DescribeClusterResult dc = admin.describeCluster();
            String clusterId = dc.clusterId().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Collection<Node> nodes = dc.nodes().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Node controller = dc.controller().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            ctx.log("cluster id %s, nodes %s, controller %s", clusterId, nodes, controller);
            check(clusterId != null && !clusterId.isEmpty(), "describeCluster: empty cluster id");
            check(!nodes.isEmpty(), "describeCluster: no nodes");
            Node broker = nodes.iterator().next();
            check(broker.id() >= 0 && broker.port() > 0 && !broker.host().isEmpty(), "bad node %s", broker);
            check(controller != null && !controller.isEmpty(), "describeCluster: no controller");

            ctx.step("createTopics %s, %s", t1, t2);
            NewTopic nt1 = new NewTopic(t1, 3, (short) 1)
                    .configs(Map.of("retention.ms", "123456789", "max.message.bytes", "2000000"));
            NewTopic nt2 = new NewTopic(t2, 1, (short) 1);
            CreateTopicsResult cr = admin.createTopics(List.of(nt1, nt2));
            cr.all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            checkEq(3, cr.numPartitions(t1).get(), "createTopics numPartitions(t1)");
            checkEq(1, cr.replicationFactor(t1).get(), "createTopics replicationFactor(t1)");
            Uuid id1 = cr.topicId(t1).get();
            check(id1 != null && !id1.equals(Uuid.ZERO_UUID), "createTopics: no topic id for %s", t1);
            Config created = cr.config(t1).get();
            checkEq("123456789", created.get("retention.ms").value(), "createTopics config retention.ms");
            ctx.log("created %s (id %s) and %s", t1, id1, t2);
            Util.waitForLeaders(admin, Map.of(t1, 3, t2, 1));

            ctx.step("createTopics %s again (expect TOPIC_ALREADY_EXISTS)", t1);
            // creating it again fails with TOPIC_ALREADY_EXISTS
            try {
                admin.createTopics(List.of(new NewTopic(t1, 3, (short) 1))).all()
                        .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                throw new AssertionError("second createTopics(" + t1 + ") succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof TopicExistsException,
                        "second createTopics: expected TopicExistsException, got %s", e.getCause());
            }

            ctx.step("listTopics / describeTopics");
            Util.waitUntil(OP_TIMEOUT_MS, "listTopics to show both topics", () -> {
                try {
                    return admin.listTopics().names().get().containsAll(Set.of(t1, t2));
                } catch (Exception e) {
                    return false;
                }
            }, null);
            Map<String, TopicDescription> desc = admin.describeTopics(List.of(t1, t2)).allTopicNames()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            TopicDescription d1 = desc.get(t1);
            checkEq(t1, d1.name(), "describeTopics name");
            checkEq(id1, d1.topicId(), "describeTopics topicId");
            check(!d1.isInternal(), "%s reported internal", t1);
            checkEq(3, d1.partitions().size(), "describeTopics(t1) partitions");
            for (int i = 0; i < 3; i++) {
                TopicPartitionInfo p = d1.partitions().get(i);
                checkEq(i, p.partition(), "partition index");
                checkEq(broker.id(), p.leader().id(), "leader of " + t1 + "-" + i);
                checkEq(1, p.replicas().size(), "replicas of " + t1 + "-" + i);
                checkEq(1, p.isr().size(), "isr of " + t1 + "-" + i);
            }
            checkEq(1, desc.get(t2).partitions().size(), "describeTopics(t2) partitions");

            ctx.step("describeConfigs(topic %s)", t1);
            ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, t1);
            Config tc = admin.describeConfigs(List.of(topicRes)).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topicRes);
            ConfigEntry retention = tc.get("retention.ms");
            check(retention != null, "describeConfigs(topic) has no retention.ms");
            checkEq("123456789", retention.value(), "topic retention.ms");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms source");
            checkEq("2000000", tc.get("max.message.bytes").value(), "topic max.message.bytes");
            ConfigEntry cleanup = tc.get("cleanup.policy");
            check(cleanup != null, "describeConfigs(topic) has no cleanup.policy");
            checkEq("delete", cleanup.value(), "topic cleanup.policy");
            check(cleanup.isDefault(), "cleanup.policy should be a default, source %s", cleanup.source());
            ctx.log("topic config: %d entries", tc.entries().size());

            ctx.step("describeConfigs(broker %d)", broker.id());
            ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(broker.id()));
            Config bc = admin.describeConfigs(List.of(brokerRes)).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(brokerRes);
            check(bc != null && !bc.entries().isEmpty(), "describeConfigs(broker %d) is empty", broker.id());
            ConfigEntry np = bc.get("num.partitions");
            check(np != null && np.value() != null && Integer.parseInt(np.value()) >= 1,
                    "broker num.partitions missing or bad: %s", np);
            ConfigEntry mmb = bc.get("message.max.bytes");
            check(mmb != null && mmb.value() != null && Integer.parseInt(mmb.value()) > 0,
                    "broker message.max.bytes missing or bad: %s", mmb);
            ctx.log("broker config: %d entries, num.partitions=%s", bc.entries().size(), np.value());

            ctx.step("deleteTopics");
            admin.deleteTopics(List.of(t1, t2)).all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Util.waitUntil(OP_TIMEOUT_MS, "deleted topics to leave listTopics", () -> {
                try {
                    Set<String> names = admin.listTopics().names().get();
                    return !names.contains(t1) && !names.contains(t2);
                } catch (Exception e) {
                    return false;
                }
            }, null);
            try {
                admin.describeTopics(List.of(t1)).allTopicNames().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                throw new AssertionError("describeTopics of deleted " + t1 + " succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof UnknownTopicOrPartitionException,
                        "describe deleted topic: expected UnknownTopicOrPartitionException, got %s", e.getCause());
            }
            ctx.log("deleted both topics");
        }
    }
}
