package workbook.connect;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Turns a Debezium truncate event (an envelope with {@code op = "t"}) into a flat marker record
 * that Debezium's {@code ExtractNewRecordState} passes on unchanged, so a TRUNCATE reaches Bronze.
 *
 * <p>Why this exists: {@code ExtractNewRecordState} (Debezium 3.6) drops every truncate event
 * ({@code handleTruncateRecord} returns null), and Kafka Connect has no predicate on a record's
 * operation, so no shipped transform keeps truncates while flattening the other events. Place it
 * before {@code ExtractNewRecordState}; it leaves every other record untouched.
 *
 * <p>The marker's value has no key columns: {@code __op = "t"} and the same metadata fields that
 * {@code ExtractNewRecordState}'s {@code add.fields} writes, under the same names ({@code table}
 * and {@code lsn} become {@code __table} and {@code __lsn}, {@code source.ts_ms} becomes
 * {@code __source_ts_ms}). Its schema is named {@code <envelope name without .Envelope>.TruncateMarker}.
 */
public final class TruncateMarker<R extends ConnectRecord<R>> implements Transformation<R> {

    public static final String ADD_FIELDS = "add.fields";
    public static final String PREFIX = "add.fields.prefix";

    private static final ConfigDef CONFIG = new ConfigDef()
            .define(ADD_FIELDS, ConfigDef.Type.LIST, "", ConfigDef.Importance.MEDIUM,
                    "Envelope fields copied into the marker, as ExtractNewRecordState's add.fields")
            .define(PREFIX, ConfigDef.Type.STRING, "__", ConfigDef.Importance.LOW,
                    "Prefix of the copied fields' names");

    private List<String> fields = new ArrayList<>();
    private String prefix = "__";
    private final Map<Schema, Schema> schemas = new ConcurrentHashMap<>();

    @Override
    public void configure(Map<String, ?> configs) {
        Map<String, Object> parsed = CONFIG.parse(configs);
        fields = new ArrayList<>();
        for (Object f : (List<?>) parsed.get(ADD_FIELDS)) {
            String name = String.valueOf(f).trim();
            if (!name.isEmpty()) {
                fields.add(name);
            }
        }
        prefix = (String) parsed.get(PREFIX);
    }

    @Override
    public R apply(R record) {
        if (!(record.value() instanceof Struct)) {
            return record;
        }
        Struct envelope = (Struct) record.value();
        Schema schema = envelope.schema();
        if (schema.name() == null || !schema.name().endsWith(".Envelope") || schema.field("op") == null
                || !"t".equals(envelope.getString("op"))) {
            return record;
        }
        Schema marker = schemas.computeIfAbsent(schema, this::markerSchema);
        Struct value = new Struct(marker);
        value.put(prefix + "op", "t");
        for (String f : fields) {
            if (!"op".equals(f)) {
                value.put(outName(f), read(envelope, f));
            }
        }
        return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(), record.key(),
                marker, value, record.timestamp());
    }

    private String outName(String field) {
        return prefix + field.replace('.', '_');
    }

    /** The struct that holds {@code field}: {@code op} and {@code ts_ms} the envelope, {@code a.b} a, else source. */
    private static String[] locate(String field) {
        int dot = field.indexOf('.');
        if (dot > 0) {
            return new String[] {field.substring(0, dot), field.substring(dot + 1)};
        }
        if ("op".equals(field) || "ts_ms".equals(field)) {
            return new String[] {null, field};
        }
        return new String[] {"source", field};
    }

    private static Object read(Struct envelope, String field) {
        String[] at = locate(field);
        Struct parent = at[0] == null ? envelope : envelope.getStruct(at[0]);
        if (parent == null || parent.schema().field(at[1]) == null) {
            return null;
        }
        return parent.getWithoutDefault(at[1]);
    }

    private Schema markerSchema(Schema envelope) {
        String base = envelope.name().substring(0, envelope.name().length() - ".Envelope".length());
        SchemaBuilder builder = SchemaBuilder.struct().name(base + ".TruncateMarker");
        builder.field(prefix + "op", Schema.STRING_SCHEMA);
        for (String f : fields) {
            if ("op".equals(f)) {
                continue;
            }
            String[] at = locate(f);
            Schema parent = at[0] == null ? envelope : envelope.field(at[0]) == null ? null : envelope.field(at[0]).schema();
            Field source = parent == null ? null : parent.field(at[1]);
            if (source == null) {
                throw new org.apache.kafka.connect.errors.DataException(
                        "TruncateMarker: field " + f + " is not in the envelope " + envelope.name());
            }
            builder.field(outName(f), optional(source.schema()));
        }
        return builder.build();
    }

    private static Schema optional(Schema schema) {
        SchemaBuilder copy = new SchemaBuilder(schema.type()).optional();
        if (schema.name() != null) {
            copy.name(schema.name());
        }
        if (schema.version() != null) {
            copy.version(schema.version());
        }
        if (schema.parameters() != null) {
            copy.parameters(schema.parameters());
        }
        return copy.build();
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public void close() {
        schemas.clear();
    }
}
