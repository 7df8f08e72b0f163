// Kafka's KafkaShareConsumer with explicit acknowledgement, for tests/integration/test_share_consumers.py.
// Usage: java -cp "$KAFKA_HOME/libs/*:<classes>" ShareAck <bootstrap> <group> <topic> <expectedDeliveries>
// On a record's first delivery: offset % 3 == 0 -> RELEASE, offset % 3 == 1 -> REJECT, else ACCEPT;
// on a redelivery -> ACCEPT. Prints one JSON line per delivery ({"offset":..,"deliveryCount":..}) and one
// {"commitError":..} line per partition whose commitSync failed. Stops after the expected number of
// deliveries followed by two empty polls, or after 60 s.
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareAck {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        int expected = Integer.parseInt(args[3]);
        int seen = 0;
        int empty = 0;
        long deadline = System.currentTimeMillis() + 60_000;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            while (System.currentTimeMillis() < deadline && !(seen >= expected && empty >= 2)) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    empty++;
                    continue;
                }
                empty = 0;
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    int count = r.deliveryCount().orElse((short) 0);
                    System.out.println("{\"offset\":" + r.offset() + ",\"deliveryCount\":" + count + "}");
                    seen++;
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (count == 1 && r.offset() % 3 == 0) {
                        type = AcknowledgeType.RELEASE;
                    } else if (count == 1 && r.offset() % 3 == 1) {
                        type = AcknowledgeType.REJECT;
                    }
                    consumer.acknowledge(r, type);
                }
                Map<TopicIdPartition, Optional<org.apache.kafka.common.KafkaException>> result = consumer.commitSync();
                for (Map.Entry<TopicIdPartition, Optional<org.apache.kafka.common.KafkaException>> e : result.entrySet()) {
                    if (e.getValue().isPresent()) {
                        System.out.println("{\"commitError\":\"" + e.getKey() + " " + e.getValue().get() + "\"}");
                    }
                }
            }
        }
    }
}
