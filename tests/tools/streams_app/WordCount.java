// Kafka Streams word count for tests/integration/test_streams_groups.py: Kafka 4.3.1's Streams with
// the streams rebalance protocol (KIP-1071, group.protocol=streams) by default.
//
//   java -cp <kafka libs>/*:<classes> WordCount <bootstrap> <application.id> <input> <output> <state dir> [protocol] [guarantee]
//
// Prints "STATE <new>" on every state change and "ASSIGNED <n>" with the number of active tasks
// once RUNNING; on SIGTERM closes (a clean leave) and the JVM exits 143; exits 1 on ERROR.
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class WordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args.length > 5 ? args[5] : "streams");
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.length > 6 ? args[6] : "at_least_once");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
            .flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((k, w) -> !w.isEmpty())
            .map((k, w) -> KeyValue.pair(w, w))
            .groupByKey()
            .count(Materialized.as("counts"))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        int[] exit = {0};
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("ASSIGNED " + streams.metadataForLocalThreads().stream().mapToInt(t -> t.activeTasks().size()).sum());
            }
            if (now == KafkaStreams.State.ERROR) {
                exit[0] = 1;
                done.countDown();
            }
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("FATAL " + e);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(20));
        System.exit(exit[0]);
    }
}
