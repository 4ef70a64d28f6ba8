// SafeTensorsWriter.java — writes safetensors files byte for byte as HF's safetensors library
// does (tensors sorted by dtype then name, compact JSON header padded with spaces to 8 bytes,
// __metadata__ {"format":"pt"}), and checkpoints in the layout of transformers' save_pretrained
// (model.safetensors, or model-0000i-of-0000n.safetensors shards with model.safetensors.index.json).
package dev.drmas.model;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;

public final class SafeTensorsWriter {
    private SafeTensorsWriter() {
    }

    /** Tensor bytes are written in slices of this size (a ByteBuffer holds at most 2 GiB). */
    private static final long CHUNK = 1L << 30;

    /**
     * Writes {@code tensors} (float32, bfloat16 or float16, any device, any layout) to one
     * safetensors file with {@code __metadata__} {"format": "pt"}.
     */
    public static void write(Path file, Map<String, Tensor> tensors) throws IOException {
        record Entry(String name, Tensor tensor, SafeTensors.Dtype dtype, long[] shape, long bytes) {
        }
        List<Entry> entries = new ArrayList<>();
        for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
            String name = e.getKey();
            Tensor t = e.getValue();
            if (name.isEmpty() || name.equals("__metadata__")) throw new IllegalArgumentException("invalid tensor name '" + name + "'");
            SafeTensors.Dtype d = SafeTensors.Dtype.of(t.scalar_type().intern());
            if (d == null) {
                throw new IllegalArgumentException(file + ": tensor '" + name + "' is " + t.scalar_type().intern()
                        + "; safetensors output supports float32, bfloat16 and float16");
            }
            long[] shape = new long[(int) t.dim()];
            for (int i = 0; i < shape.length; i++) shape[i] = t.size(i);
            entries.add(new Entry(name, t, d, shape, t.numel() * d.bytes()));
        }
        // the reference library orders by dtype, widest first (its enum order: F16 < BF16 < F32), then by name
        entries.sort(Comparator.comparing((Entry e) -> e.dtype().ordinal()).reversed().thenComparing(Entry::name));

        StringBuilder h = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
        long offset = 0;
        for (Entry e : entries) {
            h.append(',');
            jsonString(h, e.name());
            h.append(":{\"dtype\":\"").append(e.dtype()).append("\",\"shape\":[");
            for (int i = 0; i < e.shape().length; i++) h.append(i == 0 ? "" : ",").append(e.shape()[i]);
            h.append("],\"data_offsets\":[").append(offset).append(',').append(offset + e.bytes()).append("]}");
            offset += e.bytes();
        }
        h.append('}');
        byte[] json = h.toString().getBytes(StandardCharsets.UTF_8);
        int pad = (8 - json.length % 8) % 8; // so that the data section starts 8-byte aligned
        ByteBuffer head = ByteBuffer.allocate(8 + json.length + pad).order(ByteOrder.LITTLE_ENDIAN);
        head.putLong(json.length + pad).put(json);
        for (int i = 0; i < pad; i++) head.put((byte) ' ');
        head.flip();

        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            writeFully(ch, head);
            Device cpu = new Device("cpu");
            for (Entry e : entries) {
                if (e.bytes() == 0) continue;
                try (PointerScope scope = new PointerScope()) {
                    // a contiguous CPU copy only where the tensor is not one already
                    Tensor c = e.tensor().detach().to(cpu, e.tensor().scalar_type()).contiguous();
                    MemorySegment data = MemorySegment.ofAddress(c.data_ptr().address()).reinterpret(e.bytes());
                    for (long off = 0; off < e.bytes(); off += CHUNK) {
                        writeFully(ch, data.asSlice(off, Math.min(CHUNK, e.bytes() - off)).asByteBuffer());
                    }
                }
            }
        }
    }

    /**
     * Writes a checkpoint's weights into {@code dir} as transformers' save_pretrained does:
     * {@code tensors} are taken in their map order (the model's state-dict order, as transformers
     * 4.x; 5.x sorts the names first, so its shard boundaries differ, and each loads the other's)
     * and packed greedily into shards of at most {@code maxShardBytes}, a larger tensor getting a
     * shard of its own. One shard is written as model.safetensors; several as
     * model-0000i-of-0000n.safetensors plus model.safetensors.index.json (metadata total_size and
     * total_parameters, weight_map). Weight files of an earlier save in {@code dir} are removed.
     * Returns the files written.
     */
    public static List<Path> writeCheckpoint(Path dir, Map<String, Tensor> tensors, long maxShardBytes) throws IOException {
        if (maxShardBytes <= 0) throw new IllegalArgumentException("maxShardBytes must be > 0, got " + maxShardBytes);
        List<Map<String, Tensor>> shards = new ArrayList<>();
        Map<String, Tensor> current = new LinkedHashMap<>();
        long currentBytes = 0, total = 0, parameters = 0;
        for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
            long bytes = e.getValue().numel() * e.getValue().element_size();
            total += bytes;
            parameters += e.getValue().numel();
            if (bytes > maxShardBytes) {
                shards.add(Map.of(e.getKey(), e.getValue()));
                continue;
            }
            if (currentBytes + bytes > maxShardBytes) {
                shards.add(current);
                current = new LinkedHashMap<>();
                currentBytes = 0;
            }
            current.put(e.getKey(), e.getValue());
            currentBytes += bytes;
        }
        if (!current.isEmpty() || shards.isEmpty()) shards.add(current);

        Files.createDirectories(dir);
        removeWeightFiles(dir);
        List<Path> written = new ArrayList<>();
        if (shards.size() == 1) {
            Path f = dir.resolve(SafeTensors.SINGLE_FILE);
            write(f, shards.getFirst());
            written.add(f);
            return written;
        }
        Map<String, Object> weightMap = new TreeMap<>();
        for (int i = 0; i < shards.size(); i++) {
            String name = String.format("model-%05d-of-%05d.safetensors", i + 1, shards.size());
            write(dir.resolve(name), shards.get(i));
            written.add(dir.resolve(name));
            for (String t : shards.get(i).keySet()) weightMap.put(t, name);
        }
        Map<String, Object> index = new TreeMap<>();
        index.put("metadata", new TreeMap<>(Map.of("total_parameters", parameters, "total_size", total)));
        index.put("weight_map", weightMap);
        Path indexFile = dir.resolve(SafeTensors.INDEX_FILE);
        Files.writeString(indexFile, ModelConfig.pythonStyleJson(ModelConfig.JSON.valueToTree(index)), StandardCharsets.UTF_8);
        written.add(indexFile);
        return written;
    }

    private static void removeWeightFiles(Path dir) throws IOException {
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "model{.safetensors,.safetensors.index.json,-*-of-*.safetensors}")) {
            for (Path p : ds) Files.delete(p);
        }
    }

    private static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) ch.write(b);
    }

    /** A JSON string as serde_json writes it: only '"', '\\' and control characters escaped. */
    private static void jsonString(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                case '\b' -> b.append("\\b");
                case '\f' -> b.append("\\f");
                default -> {
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        b.append('"');
    }
}
