package dev.runplane.tests;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.GenericRecordBuilder;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.avro.message.BinaryMessageEncoder;
import org.apache.avro.message.SchemaStore;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * An outside client of runplane, written from schemas/README.md alone.
 *
 * <pre>
 *   Client emit  BOOTSTRAP PREFIX SCHEMAS_DIR N    N requests, each sent twice, and one that
 *                                                  cannot decode; prints one line per reply
 *   Client audit BOOTSTRAP PREFIX SCHEMAS_DIR N    reads N audit records from the beginning;
 *                                                  prints one line per record
 * </pre>
 *
 * The .avsc files are parsed at run time in the README's published parse order (Avro Java's
 * parser does not resolve forward references); every reader resolves the writer schema by
 * fingerprint from schemas/history/ (the README's "Writer schemas for readers").
 */
public final class Client {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: Client emit|audit BOOTSTRAP PREFIX SCHEMAS_DIR N");
      System.exit(2);
    }
    Path schemas = Path.of(args[3]);
    Map<String, Schema> types = parseInPublishedOrder(schemas);
    SchemaStore.Cache history = history(schemas);
    int n = Integer.parseInt(args[4]);
    switch (args[0]) {
      case "emit" -> emit(args[1], args[2], types, history, n);
      case "audit" -> audit(args[1], args[2], types, history, n);
      default -> {
        System.err.println("unknown mode " + args[0]);
        System.exit(2);
      }
    }
  }

  /** The .avsc files in the order schemas/README.md lists under "Parse order". */
  static Map<String, Schema> parseInPublishedOrder(Path dir) throws IOException {
    String readme = Files.readString(dir.resolve("README.md"), StandardCharsets.UTF_8);
    String section = readme.split("### Parse order", 2)[1].split("###", 2)[0];
    Matcher m = Pattern.compile("(?m)^\\d+\\. `([^`]+\\.avsc)`$").matcher(section);
    Schema.Parser parser = new Schema.Parser();
    int files = 0;
    while (m.find()) {
      parser.parse(dir.resolve(m.group(1)).toFile());
      files++;
    }
    if (files == 0) {
      throw new IllegalStateException("no parse order in " + dir.resolve("README.md"));
    }
    return parser.getTypes();
  }

  /** Every writer schema runplane has written: schemas/history/, one file per fingerprint. */
  static SchemaStore.Cache history(Path dir) throws IOException {
    SchemaStore.Cache cache = new SchemaStore.Cache();
    try (Stream<Path> files = Files.list(dir.resolve("history"))) {
      for (Path file : (Iterable<Path>) files.sorted()::iterator) {
        if (file.toString().endsWith(".avsc")) {
          cache.addSchema(new Schema.Parser().parse(file.toFile()));
        }
      }
    }
    return cache;
  }

  static Properties common(String bootstrap) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    return p;
  }

  static KafkaConsumer<String, byte[]> consumer(String bootstrap) {
    Properties p = common(bootstrap);
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    return new KafkaConsumer<>(p);
  }

  static void emit(
      String bootstrap, String prefix, Map<String, Schema> types, SchemaStore.Cache history, int n)
      throws Exception {
    Schema request = types.get("runplane.v1.AdmissionRequest");
    Schema reply = types.get("runplane.v1.AdmissionReply");
    BinaryMessageEncoder<GenericRecord> encoder =
        new BinaryMessageEncoder<>(GenericData.get(), request);
    BinaryMessageDecoder<GenericRecord> decoder =
        new BinaryMessageDecoder<>(GenericData.get(), reply, history);
    String replies = prefix + "admission.replies";
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      keys.add("jvm-" + i);
    }
    String garbage = "jvm-garbage";
    try (KafkaConsumer<String, byte[]> consumer = consumer(bootstrap);
        KafkaProducer<String, byte[]> producer = producer(bootstrap)) {
      // Start at each key's partition of admission.replies as it ends now: our replies come after.
      int partitions = consumer.partitionsFor(replies).size();
      Set<TopicPartition> assigned = new HashSet<>();
      for (String key : keys) {
        assigned.add(new TopicPartition(replies, partitionOf(key, partitions)));
      }
      assigned.add(new TopicPartition(replies, partitionOf(garbage, partitions)));
      consumer.assign(assigned);
      consumer.seekToEnd(assigned);
      for (TopicPartition tp : assigned) {
        consumer.position(tp);
      }
      for (int copy = 0; copy < 2; copy++) {
        for (String key : keys) {
          GenericRecord r =
              new GenericRecordBuilder(request)
                  .set("admission_key", key)
                  .set("capability", "refund")
                  .set("input_json", "{\"invoice_id\": \"inv-" + key + "\"}")
                  .set("correlation_keys", Map.of("order", key))
                  .set("tenant", "acme")
                  .set("initiator", "alice")
                  .set("requested_ms", System.currentTimeMillis())
                  .build();
          producer.send(new ProducerRecord<>(prefix + "admission", key, bytes(encoder.encode(r))));
        }
      }
      // Written with a schema admission cannot know: answered REFUSED all the same.
      byte[] unknown = {(byte) 0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0x02, 0x6b};
      producer.send(new ProducerRecord<>(prefix + "admission", garbage, unknown));
      producer.flush();
      int wanted = 2 * n + 1;
      int got = 0;
      long deadline = System.currentTimeMillis() + TIMEOUT.toMillis();
      while (got < wanted && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, byte[]> rec : consumer.poll(Duration.ofMillis(200))) {
          if (!keys.contains(rec.key()) && !garbage.equals(rec.key())) {
            continue;
          }
          GenericRecord r = decoder.decode(rec.value());
          System.out.println(
              "reply\t" + rec.key() + "\t" + r.get("outcome") + "\t" + r.get("run_id") + "\t"
                  + r.get("status") + "\t" + r.get("reason"));
          got++;
        }
      }
      if (got < wanted) {
        System.err.println("only " + got + " of " + wanted + " replies within " + TIMEOUT);
        System.exit(1);
      }
    }
  }

  static KafkaProducer<String, byte[]> producer(String bootstrap) {
    Properties p = common(bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    return new KafkaProducer<>(p);
  }

  /** Java's default partitioner for a keyed record: murmur2 of the UTF-8 key. */
  static int partitionOf(String key, int partitions) {
    return Utils.toPositive(Utils.murmur2(key.getBytes(StandardCharsets.UTF_8))) % partitions;
  }

  static byte[] bytes(ByteBuffer buffer) {
    byte[] out = new byte[buffer.remaining()];
    buffer.get(out);
    return out;
  }

  static void audit(
      String bootstrap, String prefix, Map<String, Schema> types, SchemaStore.Cache history, int n)
      throws Exception {
    Schema reader = types.get("runplane.v1.AuditRecord");
    BinaryMessageDecoder<GenericRecord> decoder =
        new BinaryMessageDecoder<>(GenericData.get(), reader, history);
    String topic = prefix + "audit";
    try (KafkaConsumer<String, byte[]> consumer = consumer(bootstrap)) {
      List<TopicPartition> all = new ArrayList<>();
      for (PartitionInfo info : consumer.partitionsFor(topic)) {
        all.add(new TopicPartition(topic, info.partition()));
      }
      consumer.assign(all);
      consumer.seekToBeginning(all);
      int got = 0;
      long deadline = System.currentTimeMillis() + TIMEOUT.toMillis();
      while (got < n && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, byte[]> rec : consumer.poll(Duration.ofMillis(200))) {
          GenericRecord r = decoder.decode(rec.value());
          System.out.println(
              "audit\t" + rec.key() + "\t" + rec.partition() + "\t" + r.get("session_id") + "\t"
                  + r.get("seq") + "\t" + r.get("kind") + "\t" + r.get("verdict") + "\t"
                  + r.get("schema_version"));
          got++;
        }
      }
      if (got < n) {
        System.err.println("only " + got + " of " + n + " audit records within " + TIMEOUT);
        System.exit(1);
      }
    }
  }
}
