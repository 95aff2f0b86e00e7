package workbook.connect;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Gives a read event ({@code op = "r"}) whose source block lacks its log position the position
 * of the connector's offset when it was emitted.
 *
 * <p>Why this exists: Debezium's PostgreSQL connector emits the reads of an incremental snapshot
 * (the {@code execute-snapshot} signal) with {@code source.lsn} null, although it emits them at a
 * known place in the change stream: when it closes a snapshot window, at the offset it has then
 * reached, after every change it deduplicated them against. Silver and Bronze replay order
 * events by log position, so a read without one cannot be placed. The offset's position is the
 * read's place: later than every change before the window and earlier than every change after
 * it. No shipped transform copies an offset into the value. Place it before
 * {@code ExtractNewRecordState}; it changes nothing else (a field already set is kept).
 *
 * <p>Config {@code fields}: the source fields to fill, each from the offset entry of the same
 * name ({@code lsn} for PostgreSQL).
 */
public final class SnapshotPosition<R extends ConnectRecord<R>> implements Transformation<R> {

    public static final String FIELDS = "fields";

    private static final ConfigDef CONFIG = new ConfigDef()
            .define(FIELDS, ConfigDef.Type.LIST, "lsn", ConfigDef.Importance.MEDIUM,
                    "Source fields filled from the offset entry of the same name when they are null");

    private List<String> fields = new ArrayList<>();

    @Override
    public void configure(Map<String, ?> configs) {
        Map<String, Object> parsed = CONFIG.parse(configs);
        fields = new ArrayList<>();
        for (Object f : (List<?>) parsed.get(FIELDS)) {
            String name = String.valueOf(f).trim();
            if (!name.isEmpty()) {
                fields.add(name);
            }
        }
    }

    @Override
    public R apply(R record) {
        if (!(record instanceof SourceRecord) || !(record.value() instanceof Struct)) {
            return record;
        }
        Struct envelope = (Struct) record.value();
        if (envelope.schema().field("op") == null || envelope.schema().field("source") == null
                || !"r".equals(envelope.getString("op"))) {
            return record;
        }
        Map<String, ?> offset = ((SourceRecord) record).sourceOffset();
        Struct source = envelope.getStruct("source");
        if (offset == null || source == null) {
            return record;
        }
        Struct filled = null;
        for (String name : fields) {
            Field field = source.schema().field(name);
            Object value = offset.get(name);
            if (field == null || value == null || source.getWithoutDefault(name) != null) {
                continue;
            }
            if (filled == null) {
                filled = copy(source);
            }
            filled.put(field, convert(value, field));
        }
        if (filled == null) {
            return record;
        }
        Struct out = copy(envelope);
        out.put("source", filled);
        return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(), record.key(),
                record.valueSchema(), out, record.timestamp());
    }

    private static Object convert(Object value, Field field) {
        switch (field.schema().type()) {
            case INT64:
                return ((Number) value).longValue();
            case INT32:
                return ((Number) value).intValue();
            case STRING:
                return String.valueOf(value);
            default:
                return value;
        }
    }

    private static Struct copy(Struct struct) {
        Struct out = new Struct(struct.schema());
        for (Field f : struct.schema().fields()) {
            Object v = struct.getWithoutDefault(f.name());
            if (v != null) {
                out.put(f, v);
            }
        }
        return out;
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public void close() {
    }
}
