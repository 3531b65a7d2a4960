package dev.pykafka;

import static dev.pykafka.Util.OP_TIMEOUT_MS;
import static dev.pykafka.Util.check;
import static dev.pykafka.Util.checkEq;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
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
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;

/**
 * Non-idempotent producer (enable.idempotence=false, acks=all), 1000 records with keys and headers for each
 * compression type, into a 3-partition topic; then read everything back from the beginning and compare each
 * record (key, value, headers, timestamp) at the partition and offset the producer was told.
 */
final class ProduceConsumeScenario {
    private ProduceConsumeScenario() {}

    static final String[] COMPRESSION = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PER_COMPRESSION = 1000;

    record Expected(String key, String value, long timestamp, List<Header> headers) {}

    static void run(Ctx ctx) throws Exception {
        String topic = ctx.id("t");
        ctx.step("createTopics %s", topic);
        try (Admin admin = Util.admin(ctx)) {
            Util.createTopics(admin, Map.of(topic, 3));
        }
        List<TopicPartition> tps = Util.partitions(topic, 3);
        Map<TopicPartition, Map<Long, Expected>> sent = new HashMap<>();
        long baseTs = System.currentTimeMillis() - 60_000;
        String filler = "x".repeat(200);

        for (String comp : COMPRESSION) {
            ctx.step("produce %d records, compression=%s", PER_COMPRESSION, comp);
            Properties p = Util.producerProps(ctx, "producer-" + comp);
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, comp);
            p.put(ProducerConfig.BATCH_SIZE_CONFIG, "16384");
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            List<Expected> expected = new ArrayList<>();
            try (KafkaProducer<String, String> producer = Util.producer(p)) {
                for (int i = 0; i < PER_COMPRESSION; i++) {
                    // every 10th record has a null key, every 50th a null value (tombstone), every 3rd an
                    // explicit timestamp; all records carry headers, one of them with a null value.
                    String key = i % 10 == 0 ? null : "key-" + comp + "-" + i;
                    String value = i % 50 == 7 ? null : "value-" + comp + "-" + i + "-" + filler.substring(i % 200);
                    Long ts = i % 3 == 0 ? baseTs + i : null;
                    RecordHeaders headers = new RecordHeaders();
                    headers.add(new RecordHeader("compression", comp.getBytes(StandardCharsets.UTF_8)));
                    headers.add(new RecordHeader("index", ByteBuffer.allocate(4).putInt(i).array()));
                    if (i % 4 == 0) {
                        headers.add(new RecordHeader("empty", new byte[0]));
                        headers.add(new RecordHeader("null", null));
                        headers.add(new RecordHeader("index", "dup".getBytes(StandardCharsets.UTF_8)));
                    }
                    Integer partition = i % 7 == 0 ? i % 3 : null;
                    futures.add(producer.send(new ProducerRecord<>(topic, partition, ts, key, value, headers)));
                    expected.add(new Expected(key, value, ts == null ? -1 : ts, Arrays.asList(headers.toArray())));
                }
                producer.flush();
                for (int i = 0; i < futures.size(); i++) {
                    RecordMetadata md = futures.get(i).get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    TopicPartition tp = new TopicPartition(md.topic(), md.partition());
                    Expected e = expected.get(i);
                    if (e.timestamp() >= 0) {
                        checkEq(e.timestamp(), md.timestamp(), "RecordMetadata.timestamp of " + comp + " #" + i);
                    } else {
                        e = new Expected(e.key(), e.value(), md.timestamp(), e.headers());
                    }
                    Expected prev = sent.computeIfAbsent(tp, k -> new HashMap<>()).put(md.offset(), e);
                    check(prev == null, "two sends acknowledged at %s offset %d", tp, md.offset());
                }
            }
            ctx.log("produced %d records with compression=%s", PER_COMPRESSION, comp);
        }

        ctx.step("read everything back (read_uncommitted)");
        Util.Drained d = Util.drain(ctx, tps, "read_uncommitted", 60_000);
        int total = COMPRESSION.length * PER_COMPRESSION;
        checkEq(total, d.count(), "records read back");
        for (TopicPartition tp : tps) {
            Map<Long, Expected> exp = sent.getOrDefault(tp, Map.of());
            List<ConsumerRecord<String, String>> got = d.records().get(tp);
            checkEq((long) exp.size(), d.endOffsets().get(tp), "end offset of " + tp);
            checkEq(exp.size(), got.size(), "records in " + tp);
            long nextOffset = 0;
            for (ConsumerRecord<String, String> r : got) {
                checkEq(nextOffset, r.offset(), tp + ": offsets must be dense (no gaps) for a plain producer");
                nextOffset++;
                Expected e = exp.get(r.offset());
                check(e != null, "%s offset %d was never acknowledged to the producer", tp, r.offset());
                String where = tp + "@" + r.offset();
                checkEq(e.key(), r.key(), where + " key");
                checkEq(e.value(), r.value(), where + " value");
                checkEq(e.timestamp(), r.timestamp(), where + " timestamp");
                checkEq(TimestampType.CREATE_TIME, r.timestampType(), where + " timestamp type");
                Header[] hs = r.headers().toArray();
                checkEq(e.headers().size(), hs.length, where + " header count");
                for (int i = 0; i < hs.length; i++) {
                    checkEq(e.headers().get(i).key(), hs[i].key(), where + " header[" + i + "] key");
                    check(Arrays.equals(e.headers().get(i).value(), hs[i].value()),
                            "%s header[%d] (%s) value differs", where, i, hs[i].key());
                }
            }
            ctx.log("%s: %d records verified", tp, got.size());
        }
    }
}
