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

    /**
     * A tensor's bytes go to its file at most this many at a time: a tensor that is not in host
     * memory (a GPU's) passes to the host one slice of this size at a time, never whole (a 7B
     * model's embedding is 2 GiB in fp32), and a ByteBuffer holds at most 2 GiB.
     */
    static final long SLICE = 64L << 20;

    /** One tensor of a file, before (or apart from) its values: its name, dtype and shape. */
    public record Spec(String name, SafeTensors.Dtype dtype, long[] shape) {
        public long numel() {
            long n = 1;
            for (long d : shape) n *= d;
            return n;
        }

        public long bytes() {
            return numel() * dtype.bytes();
        }
    }

    /**
     * A file's layout: its header (the 8-byte length, the JSON, the padding), the tensors in the
     * order their bytes follow it, and where each one's bytes start in the file.
     */
    record Layout(byte[] head, List<Spec> order, long[] start) {
        long size() {
            return order.isEmpty() ? head.length : start[start.length - 1] + order.getLast().bytes();
        }
    }

    /** The layout of a file of {@code tensors} as the reference library writes it. */
    static Layout layout(Path file, List<Spec> tensors) {
        List<Spec> entries = new ArrayList<>();
        java.util.Set<String> names = new java.util.HashSet<>();
        for (Spec e : tensors) {
            if (e.name().isEmpty() || e.name().equals("__metadata__")) throw new IllegalArgumentException("invalid tensor name '" + e.name() + "'");
            if (!names.add(e.name())) throw new IllegalArgumentException(file + ": tensor '" + e.name() + "' twice");
            entries.add(e);
        }
        // the reference library orders by dtype, widest first (its enum order: F16 < BF16 < F32), then by name
        entries.sort(Comparator.comparing((Spec e) -> e.dtype().ordinal()).reversed().thenComparing(Spec::name));

        StringBuilder h = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
        long offset = 0;
        for (Spec e : entries) {
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
        long[] start = new long[entries.size()];
        long at = head.capacity();
        for (int i = 0; i < start.length; i++) {
            start[i] = at;
            at += entries.get(i).bytes();
        }
        return new Layout(head.array(), List.copyOf(entries), start);
    }

    /**
     * Writes {@code tensors} (float32, bfloat16 or float16, any device, any layout) to one
     * safetensors file with {@code __metadata__} {"format": "pt"}: the header from their names,
     * dtypes and shapes, then each tensor's bytes streamed from the tensor itself ({@link
     * #writeValues}), so that the caller hands its live tensors and no copy of them all exists.
     */
    public static void write(Path file, Map<String, Tensor> tensors) throws IOException {
        List<Spec> specs = new ArrayList<>();
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
            specs.add(new Spec(name, d, shape));
        }
        Layout layout = layout(file, specs);
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            writeFully(ch, ByteBuffer.wrap(layout.head()));
            for (int i = 0; i < layout.order().size(); i++) {
                writeValues(ch, layout.start()[i], tensors.get(layout.order().get(i).name()));
            }
        }
    }

    /**
     * Writes the elements of {@code values} (row-major, in its dtype) at byte {@code at} of {@code
     * ch}, at most {@link #SLICE} bytes at a time; returns the bytes written. The one loop of every
     * writer (whole files, pieces of a streamed checkpoint) on every device: a contiguous CPU
     * tensor's own memory is written as it is (no copy); a tensor elsewhere is copied to the host
     * a slice at a time, each freed before the next; one that is not contiguous is made so first
     * where it is (one tensor's copy: on a GPU in the GPU's memory).
     */
    static long writeValues(FileChannel ch, long at, Tensor values) throws IOException {
        return writeValues(ch, at, values, SLICE);
    }

    /** As above in slices of at most {@code sliceBytes} (at least one element; tests cut small ones). */
    static long writeValues(FileChannel ch, long at, Tensor values, long sliceBytes) throws IOException {
        Device cpu = new Device("cpu");
        try (PointerScope scope = new PointerScope()) {
            Tensor flat = values.detach().contiguous().view(-1);
            long n = flat.numel(), size = flat.element_size(), per = Math.max(1, sliceBytes / size);
            for (long first = 0; first < n; first += per) {
                try (PointerScope slice = new PointerScope()) {
                    long k = Math.min(per, n - first);
                    Tensor host = flat.narrow(0, first, k).to(cpu, flat.scalar_type());  // the same memory where it is the CPU's
                    ByteBuffer b = MemorySegment.ofAddress(host.data_ptr().address()).reinterpret(k * size).asByteBuffer();
                    long pos = at + first * size;
                    while (b.hasRemaining()) pos += ch.write(b, pos);
                }
            }
            return n * size;
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
        Map<String, Long> bytes = new LinkedHashMap<>();
        for (Map.Entry<String, Tensor> e : tensors.entrySet()) bytes.put(e.getKey(), e.getValue().numel() * e.getValue().element_size());
        List<List<String>> shards = shardPlan(bytes, maxShardBytes);
        Files.createDirectories(dir);
        removeWeightFiles(dir);
        List<Path> written = new ArrayList<>();
        List<String> files = shardFileNames(shards.size());
        for (int i = 0; i < shards.size(); i++) {
            Map<String, Tensor> shard = new LinkedHashMap<>();
            for (String name : shards.get(i)) shard.put(name, tensors.get(name));
            write(dir.resolve(files.get(i)), shard);
            written.add(dir.resolve(files.get(i)));
        }
        if (shards.size() > 1) {
            long parameters = 0;
            for (Tensor t : tensors.values()) parameters += t.numel();
            written.add(writeIndex(dir, shards, files, parameters, bytes.values().stream().mapToLong(Long::longValue).sum()));
        }
        return written;
    }

    /**
     * save_pretrained's cut of tensors (name → bytes, in order) into shards of at most {@code
     * maxShardBytes}: packed greedily in order, a larger tensor in a shard of its own; at least one
     * shard, empty when there are no tensors.
     */
    static List<List<String>> shardPlan(Map<String, Long> bytes, long maxShardBytes) {
        if (maxShardBytes <= 0) throw new IllegalArgumentException("maxShardBytes must be > 0, got " + maxShardBytes);
        List<List<String>> shards = new ArrayList<>();
        List<String> current = new ArrayList<>();
        long currentBytes = 0;
        for (Map.Entry<String, Long> e : bytes.entrySet()) {
            long b = e.getValue();
            if (b > maxShardBytes) {
                shards.add(List.of(e.getKey()));
                continue;
            }
            if (currentBytes + b > maxShardBytes) {
                shards.add(current);
                current = new ArrayList<>();
                currentBytes = 0;
            }
            current.add(e.getKey());
            currentBytes += b;
        }
        if (!current.isEmpty() || shards.isEmpty()) shards.add(current);
        return shards;
    }

    /** The files of a checkpoint of {@code n} shards: model.safetensors alone, or model-0000i-of-0000n.safetensors. */
    static List<String> shardFileNames(int n) {
        if (n == 1) return List.of(SafeTensors.SINGLE_FILE);
        List<String> names = new ArrayList<>(n);
        for (int i = 0; i < n; i++) names.add(String.format("model-%05d-of-%05d.safetensors", i + 1, n));
        return names;
    }

    /** model.safetensors.index.json of a sharded checkpoint: metadata total_size and total_parameters, weight_map. */
    static Path writeIndex(Path dir, List<List<String>> shards, List<String> files, long parameters, long total) throws IOException {
        Map<String, Object> weightMap = new TreeMap<>();
        for (int i = 0; i < shards.size(); i++) for (String t : shards.get(i)) weightMap.put(t, files.get(i));
        Map<String, Object> index = new TreeMap<>();
        index.put("metadata", new TreeMap<>(Map.of("total_parameters", parameters, "total_size", total)));
        index.put("weight_map", weightMap);
        Path indexFile = dir.resolve(SafeTensors.INDEX_FILE);
        Files.writeString(indexFile, ModelConfig.pythonStyleJson(ModelConfig.JSON.valueToTree(index)), StandardCharsets.UTF_8);
        return indexFile;
    }

    /** Removes the weight files of an earlier save from {@code dir}. */
    static void removeWeightFiles(Path dir) throws IOException {
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "model{.safetensors,.safetensors.index.json,-*-of-*.safetensors}")) {
            for (Path p : ds) Files.delete(p);
        }
    }

    static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
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
