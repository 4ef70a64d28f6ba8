// SafeTensors.java — reads HF safetensors checkpoints (one file, or shards listed by
// model.safetensors.index.json) memory-mapped: the Java heap only ever holds the JSON headers,
// and each tensor is copied once, from the mapped bytes into a LibTorch tensor of the model's dtype.
// Every header is validated the way the reference (Rust) implementation does before any tensor is read.
package dev.drmas.model;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * An open checkpoint. The files stay mapped until {@link #close()}; tensors returned by
 * {@link #get} are copies and outlive it. Not thread-safe for close, safe for concurrent gets.
 */
public final class SafeTensors implements AutoCloseable {
    public static final String SINGLE_FILE = "model.safetensors";
    public static final String INDEX_FILE = "model.safetensors.index.json";
    /** The reference implementation refuses headers above 100 MB; so do we. */
    static final long MAX_HEADER_BYTES = 100_000_000L;

    /** The element types drmas reads and writes, with their safetensors names. */
    public enum Dtype {
        F16(2, ScalarType.Half), BF16(2, ScalarType.BFloat16), F32(4, ScalarType.Float);

        final int bytes;
        final ScalarType scalarType;

        Dtype(int bytes, ScalarType scalarType) {
            this.bytes = bytes;
            this.scalarType = scalarType;
        }

        public int bytes() {
            return bytes;
        }

        public ScalarType scalarType() {
            return scalarType;
        }

        /** The safetensors dtype of a LibTorch tensor type, or null when it has none here. */
        public static Dtype of(ScalarType t) {
            for (Dtype d : values()) if (d.scalarType == t) return d;
            return null;
        }
    }

    /** Where one tensor lies: {@code offset} is its first byte in {@code file}. */
    public record Info(String name, Path file, Dtype dtype, long[] shape, long offset, long bytes) {
        public long numel() {
            long n = 1;
            for (long d : shape) n *= d;
            return n;
        }
    }

    private final Path source;
    private final Arena arena;
    private final Map<Path, MemorySegment> mapped = new LinkedHashMap<>();
    private final Map<String, Info> tensors = new TreeMap<>();

    private SafeTensors(Path source) {
        this.source = source;
        this.arena = Arena.ofShared();
    }

    /**
     * Opens a safetensors file, a shard index (*.index.json), or a checkpoint directory: its
     * model.safetensors.index.json (sharded) if there is one, else its model.safetensors.
     */
    public static SafeTensors open(Path path) {
        SafeTensors st = new SafeTensors(path);
        try {
            if (Files.isDirectory(path)) {
                Path index = path.resolve(INDEX_FILE);
                if (Files.exists(index)) {
                    st.openIndex(index);
                } else if (Files.exists(path.resolve(SINGLE_FILE))) {
                    st.openFile(path.resolve(SINGLE_FILE), null);
                } else {
                    throw new ModelFileException(path + ": no " + SINGLE_FILE + " or " + INDEX_FILE + " in this directory");
                }
            } else if (path.getFileName().toString().endsWith(".index.json")) {
                st.openIndex(path);
            } else {
                st.openFile(path, null);
            }
            return st;
        } catch (RuntimeException e) {
            st.close();
            throw e;
        }
    }

    /** The file or directory this checkpoint was opened from. */
    public Path source() {
        return source;
    }

    /** Every tensor, by name (sorted). */
    public Map<String, Info> tensors() {
        return Collections.unmodifiableMap(tensors);
    }

    public Info info(String name) {
        Info i = tensors.get(name);
        if (i == null) throw new ModelFileException(source + ": no tensor '" + name + "'");
        return i;
    }

    /**
     * A new tensor holding {@code name}'s values converted to {@code dtype} on {@code device}
     * (conversion rounds to nearest even, as LibTorch does). It is attached to the caller's
     * innermost PointerScope, if any.
     */
    public Tensor get(String name, ScalarType dtype, Device device) {
        Info i = info(name);
        if (!arena.scope().isAlive()) throw new IllegalStateException(source + " is closed");
        Tensor out;
        try (PointerScope scope = new PointerScope()) {
            if (i.numel() == 0) {
                Tensor empty = torch.empty(i.shape(), new TensorOptions(dtype), new MemoryFormatOptional());
                out = Scopes.retain(empty.to(device, dtype));
            } else {
                long address = mapped.get(i.file()).address() + i.offset();
                // a non-owning view of the mapped bytes; to(copy=true) makes the tensor we keep
                Tensor view = torch.from_blob(new Address(address), i.shape(), new TensorOptions(i.dtype().scalarType));
                out = Scopes.retain(view.to(device, dtype, false, true, new MemoryFormatOptional()));
            }
        }
        return Scopes.adopt(out);
    }

    /** Unmaps every file. Tensors already returned stay valid (they are copies). */
    @Override
    public void close() {
        if (arena.scope().isAlive()) arena.close();
    }

    /** A JavaCPP pointer to a raw address that it does not own. */
    private static final class Address extends Pointer {
        Address(long a) {
            address = a;
        }
    }

    // ------------------------------------------------------------------ parsing

    private void openIndex(Path index) {
        Path dir = index.toAbsolutePath().getParent();
        JsonNode root;
        try {
            root = ModelConfig.JSON.readTree(Files.readAllBytes(index));
        } catch (IOException e) {
            throw new ModelFileException(index + ": not valid JSON: " + e.getMessage(), e);
        }
        JsonNode map = root == null ? null : root.get("weight_map");
        if (map == null || !map.isObject()) throw new ModelFileException(index + ": weight_map is missing or not an object");
        Map<String, List<String>> byFile = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = map.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isTextual()) {
                throw new ModelFileException(index + ": weight_map['" + e.getKey() + "'] must be a file name, got " + e.getValue());
            }
            byFile.computeIfAbsent(e.getValue().asText(), k -> new ArrayList<>()).add(e.getKey());
        }
        for (Map.Entry<String, List<String>> e : byFile.entrySet()) {
            Path shard = dir.resolve(e.getKey());
            // shards live beside the index: a name that climbs out of the folder is refused
            if (!shard.normalize().startsWith(dir.normalize()) || !Files.isRegularFile(shard)) {
                throw new ModelFileException(index + ": weight_map['" + e.getValue().getFirst() + "'] names shard '"
                        + e.getKey() + "', which does not exist in " + dir);
            }
            openFile(shard, index);
            for (String name : e.getValue()) {
                Info i = tensors.get(name);
                if (i == null || !i.file().equals(shard)) {
                    throw new ModelFileException(index + ": weight_map puts tensor '" + name + "' in " + shard.getFileName()
                            + ", but that file does not hold it");
                }
            }
        }
        for (Info i : tensors.values()) {
            JsonNode f = map.get(i.name());
            if (f == null || !dir.resolve(f.asText()).equals(i.file())) {
                throw new ModelFileException(i.file() + ": tensor '" + i.name() + "' is not listed for this file in " + index);
            }
        }
    }

    /** Maps {@code file}, validates its header and registers its tensors. */
    private void openFile(Path file, Path index) {
        MemorySegment seg;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            seg = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
        } catch (NoSuchFileException e) {
            throw new ModelFileException(file + ": no such file");
        } catch (IOException e) {
            throw new ModelFileException(file + ": cannot read: " + e.getMessage(), e);
        }
        long size = seg.byteSize();
        if (size < 8) {
            throw new ModelFileException(file + ": " + size + " bytes, too short for a safetensors file "
                    + "(8-byte header length, JSON header, data)");
        }
        long n = seg.get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
        if (n < 0 || n > size - 8) {
            throw new ModelFileException(file + ": header length " + Long.toUnsignedString(n) + " exceeds the file size ("
                    + size + " bytes): not a safetensors file, or truncated");
        }
        if (n > MAX_HEADER_BYTES) {
            throw new ModelFileException(file + ": header length " + n + " is above the " + MAX_HEADER_BYTES + "-byte limit");
        }
        JsonNode header;
        try {
            header = ModelConfig.JSON.readTree(seg.asSlice(8, n).toArray(ValueLayout.JAVA_BYTE));
        } catch (IOException e) {
            throw new ModelFileException(file + ": header is not valid JSON: " + e.getMessage(), e);
        }
        if (header == null || !header.isObject()) throw new ModelFileException(file + ": header is not a JSON object");

        long dataStart = 8 + n, dataSize = size - dataStart;
        List<Info> infos = new ArrayList<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (e.getKey().equals("__metadata__")) {
                checkMetadata(file, e.getValue());
                continue;
            }
            infos.add(tensorInfo(file, e.getKey(), e.getValue(), dataStart));
        }
        // the tensors must tile the data section: sorted by offset, each starts where the last ended
        infos.sort(Comparator.comparingLong(Info::offset));
        long end = dataStart;
        for (Info i : infos) {
            if (i.offset() != end) {
                throw new ModelFileException(file + ": tensor '" + i.name() + "': data_offsets start at "
                        + (i.offset() - dataStart) + " but the previous tensor ends at " + (end - dataStart)
                        + " (tensors must follow each other without gaps or overlaps)");
            }
            if (i.offset() + i.bytes() > size) {
                throw new ModelFileException(file + ": truncated: tensor '" + i.name() + "' ends at byte "
                        + (i.offset() + i.bytes() - dataStart) + " of the data section, but the file holds only "
                        + dataSize + " data bytes");
            }
            end = i.offset() + i.bytes();
        }
        if (end != size) {
            throw new ModelFileException(file + ": " + (size - end) + " bytes after the end of the last tensor's data");
        }
        for (Info i : infos) {
            Info prev = tensors.putIfAbsent(i.name(), i);
            if (prev != null) {
                throw new ModelFileException(file + ": tensor '" + i.name() + "' is also in " + prev.file()
                        + (index == null ? "" : " (see " + index + ")"));
            }
        }
        mapped.put(file, seg);
    }

    private static void checkMetadata(Path file, JsonNode m) {
        if (!m.isObject()) throw new ModelFileException(file + ": __metadata__ must be an object of strings");
        for (Iterator<Map.Entry<String, JsonNode>> it = m.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isTextual()) {
                throw new ModelFileException(file + ": __metadata__." + e.getKey() + " must be a string, got " + e.getValue());
            }
        }
    }

    private static Info tensorInfo(Path file, String name, JsonNode t, long dataStart) {
        String where = file + ": tensor '" + name + "'";
        if (!t.isObject()) throw new ModelFileException(where + ": expected an object with dtype, shape, data_offsets");
        JsonNode dt = t.get("dtype");
        if (dt == null || !dt.isTextual()) throw new ModelFileException(where + ": dtype is missing");
        Dtype dtype;
        try {
            dtype = Dtype.valueOf(dt.asText());
        } catch (IllegalArgumentException e) {
            throw new ModelFileException(where + ": dtype " + dt.asText() + " is not supported (drmas reads F32, BF16, F16)");
        }
        long[] shape = longs(t.get("shape"), -1, where + ": shape");
        long[] off = longs(t.get("data_offsets"), 2, where + ": data_offsets");
        long bytes;
        try {
            long numel = 1;
            for (long d : shape) numel = Math.multiplyExact(numel, d);
            bytes = Math.multiplyExact(numel, dtype.bytes);
        } catch (ArithmeticException e) {
            throw new ModelFileException(where + ": shape " + Arrays.toString(shape) + " overflows");
        }
        if (off[1] < off[0] || off[1] - off[0] != bytes) {
            throw new ModelFileException(where + ": data_offsets [" + off[0] + ", " + off[1] + "] hold " + (off[1] - off[0])
                    + " bytes, but " + dtype + " " + Arrays.toString(shape) + " needs " + bytes);
        }
        return new Info(name, file, dtype, shape, dataStart + off[0], bytes);
    }

    /** A JSON array of non-negative integers (of length {@code len} unless negative). */
    private static long[] longs(JsonNode a, int len, String where) {
        if (a == null || !a.isArray() || (len >= 0 && a.size() != len)) {
            throw new ModelFileException(where + " must be a list of " + (len >= 0 ? len + " " : "") + "integers, got " + a);
        }
        long[] out = new long[a.size()];
        for (int i = 0; i < out.length; i++) {
            JsonNode v = a.get(i);
            if (!v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0) {
                throw new ModelFileException(where + "[" + i + "] must be a non-negative integer, got " + v);
            }
            out[i] = v.longValue();
        }
        return out;
    }
}
