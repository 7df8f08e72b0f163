import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Consume-transform-produce with Kafka's Java clients, until stopped (the soak's transactions):
 * args: bootstrap, input topic, output topic, group id, transactional id, group protocol
 * (classic|consumer). Each poll's records are copied in one transaction with the consumer's
 * offsets (sendOffsetsToTransaction); one transaction in three is aborted and the consumer
 * rewound to its committed offsets. A read_committed reader of the output must see every input
 * record exactly once. Prints one JSON line per commit or abort, and per error.
 */
public class TxnCopier {
    public static void main(String[] args) {
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3], txnId = args[4], protocol = args[5];
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "200");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        AtomicBoolean running = new AtomicBoolean(true);
        Random random = new Random(1);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            Thread main = Thread.currentThread();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                running.set(false);
                consumer.wakeup();
                try { main.join(30000); } catch (InterruptedException e) { }
            }));
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            System.out.println("{\"name\":\"startup_complete\"}");
            long committed = 0, aborted = 0;
            while (running.get()) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (random.nextInt(3) == 0) {
                    producer.abortTransaction();
                    aborted += records.count();
                    for (TopicPartition tp : offsets.keySet()) {
                        OffsetAndMetadata at = consumer.committed(java.util.Set.of(tp)).get(tp);
                        consumer.seek(tp, at == null ? 0 : at.offset());
                    }
                    System.out.println("{\"name\":\"aborted\",\"records\":" + records.count() + "}");
                } else {
                    producer.commitTransaction();
                    committed += records.count();
                    System.out.println("{\"name\":\"committed\",\"records\":" + records.count() + ",\"total\":" + committed + "}");
                }
            }
        } catch (Exception e) {
            System.out.println("{\"name\":\"error\",\"error\":\"" + e.toString().replace("\"", "'") + "\"}");
            System.exit(1);
        }
    }
}
