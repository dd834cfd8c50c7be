import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An upstream platform's producer, the Apache Kafka Java client, for gpualloc's tests: the agent
 * must read what real producers write (compressed batches, headers, null keys, tombstones).
 *
 * <pre>java -cp CLASSPATH ContractProducer BOOTSTRAP [producer.config=value ...] &lt; records.tsv</pre>
 *
 * Each stdin line is {@code topic<TAB>key<TAB>value<TAB>headers}: {@code \N} for a null key or
 * value, headers as {@code k=v;k=v} or empty. Defaults: {@code acks=all}, idempotence on, a 1 s
 * linger and 256 kB batches, so nothing leaves before the one flush after the last send: the records
 * of a partition share one (compressed) batch, and all go in one request. The arguments override
 * the defaults ({@code compression.type=zstd}). After the flush a few producer metrics go to stdout
 * as {@code name=value} (so a test can check the batching and the codec), and the exit code is 0;
 * a bad line exits 2, a bad setting or a failed send 1, with the reason on stderr.
 */
public final class ContractProducer {
    private static final String NULL = "\\N";
    private static final Set<String> METRICS =
            Set.of("record-send-total", "records-per-request-avg", "compression-rate-avg");

    private ContractProducer() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: ContractProducer BOOTSTRAP [producer.config=value ...] < records.tsv");
            System.exit(2);
        }
        List<ProducerRecord<byte[], byte[]>> records;
        try {
            records = read(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
        } catch (IllegalArgumentException e) {
            System.err.println("ContractProducer: " + e.getMessage());
            System.exit(2);
            return;
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config(args))) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : records) {
                sent.add(producer.send(r));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get();  // the first failed send's exception
            }
            producer.metrics().forEach((name, metric) -> {
                if (name.group().equals("producer-metrics") && METRICS.contains(name.name())) {
                    System.out.println(name.name() + "=" + metric.metricValue());
                }
            });
        } catch (ExecutionException e) {
            System.err.println("ContractProducer: send failed: " + e.getCause());
            System.exit(1);
        } catch (RuntimeException e) {
            System.err.println("ContractProducer: " + e);
            System.exit(1);
        }
    }

    private static Properties config(String[] args) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "1000");  // flush() sends at once: no wait
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 1) {
                throw new IllegalArgumentException("argument " + args[i] + ": must be name=value");
            }
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return p;
    }

    private static List<ProducerRecord<byte[], byte[]>> read(BufferedReader in) throws java.io.IOException {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        String line;
        for (int n = 1; (line = in.readLine()) != null; n++) {
            String[] f = line.split("\t", -1);
            if (f.length != 4) {
                throw new IllegalArgumentException("line " + n + ": must have 4 tab-separated fields, has " + f.length);
            }
            RecordHeaders headers = new RecordHeaders();
            for (String h : f[3].isEmpty() ? new String[0] : f[3].split(";")) {
                int eq = h.indexOf('=');
                if (eq < 1) {
                    throw new IllegalArgumentException("line " + n + ": header " + h + " must be k=v");
                }
                headers.add(h.substring(0, eq), bytes(h.substring(eq + 1)));
            }
            out.add(new ProducerRecord<>(f[0], null, bytes(f[1]), bytes(f[2]), headers));
        }
        return out;
    }

    private static byte[] bytes(String field) {
        return field.equals(NULL) ? null : field.getBytes(StandardCharsets.UTF_8);
    }
}
