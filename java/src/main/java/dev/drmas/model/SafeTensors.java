// SafeTensors.java — reads HF safetensors checkpoints (one file, or shards listed by
// model.safetensors.index.json) memory-mapped: the Java heap only ever holds the JSON headers,
// and each tensor is copied once, from the mapped bytes into a LibTorch tensor of the model's dtype.
// Every header is validated the way the reference (Rust) implementation does (SafeTensorsHeader) before any
// tensor is read.
package dev.drmas.model;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
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
    /** The dtypes a checkpoint may hold here, with their sizes, for the header check (SafeTensorsHeader). */
    private static final Map<String, Integer> DTYPE_BYTES = dtypeBytes();

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

    private static Map<String, Integer> dtypeBytes() {
        Map<String, Integer> m = new LinkedHashMap<>();
        // in the order the error message has always listed them
        for (Dtype d : List.of(Dtype.F32, Dtype.BF16, Dtype.F16)) m.put(d.name(), d.bytes);
        return Collections.unmodifiableMap(m);
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
     * model.safetensors if there is one, else its model.safetensors.index.json (sharded). The order is
     * transformers' (from_pretrained): its save_pretrained leaves a stale index beside a new single
     * file (and a stale single file beside a new index), and a folder must load the same weights here
     * as there.
     */
    public static SafeTensors open(Path path) {
        SafeTensors st = new SafeTensors(path);
        try {
            if (Files.isDirectory(path)) {
                Path index = path.resolve(INDEX_FILE);
                if (Files.exists(path.resolve(SINGLE_FILE))) {
                    st.openFile(path.resolve(SINGLE_FILE), null);
                } else if (Files.exists(index)) {
                    st.openIndex(index);
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

    /**
     * Copies elements [first, first + into.numel()) of {@code name}, flattened, into {@code into}
     * (any dtype and device; converted as {@link #get} does), straight from the mapped bytes: only
     * that part of the file is read (a sharded optimiser's rank takes its part of each tensor so).
     */
    public void read(String name, long first, Tensor into) {
        Info i = info(name);
        if (!arena.scope().isAlive()) throw new IllegalStateException(source + " is closed");
        long n = into.numel();
        if (first < 0 || n > i.numel() - first) {
            throw new ModelFileException(i.file() + ": tensor '" + name + "' has " + i.numel() + " elements; elements [" + first + ", "
                    + (first + n) + ") of it were asked for");
        }
        if (n == 0) return;
        try (PointerScope scope = new PointerScope()) {
            long address = mapped.get(i.file()).address() + i.offset() + first * i.dtype().bytes;
            Tensor view = torch.from_blob(new Address(address), new long[] {n}, new TensorOptions(i.dtype().scalarType));
            into.copy_(view.view(into.sizes()));
        }
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
        JsonNode root = ModelConfig.readJson(index);
        if (root == null || !root.isObject()) throw new ModelFileException(index + ": expected a JSON object, got " + shown(root));
        JsonNode map = root.get("weight_map");
        if (map == null || map.isNull()) throw new ModelFileException(index + ": weight_map is missing");
        if (!map.isObject()) {
            throw new ModelFileException(index + ": weight_map must be an object of tensor names and their shard files, got " + shown(map));
        }
        Map<String, List<String>> byFile = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = map.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isTextual()) {
                throw new ModelFileException(index + ": weight_map['" + e.getKey() + "'] must be a file name, got " + shown(e.getValue()));
            }
            byFile.computeIfAbsent(e.getValue().asText(), k -> new ArrayList<>()).add(e.getKey());
        }
        for (Map.Entry<String, List<String>> e : byFile.entrySet()) {
            Path shard;
            try {
                shard = dir.resolve(e.getKey());
            } catch (InvalidPathException bad) {  // e.g. a NUL in the name: valid JSON, no file name
                throw new ModelFileException(index + ": weight_map['" + e.getValue().getFirst() + "'] names shard '"
                        + e.getKey().replace("\0", "\\0") + "', which is not a valid file name (" + bad.getReason() + ")");
            }
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

    /** A JSON value as text for a message, shortened (a wrong value may be megabytes long). */
    private static String shown(JsonNode v) {
        String s = v == null ? "nothing" : v.toString();
        return s.length() <= 60 ? s : s.substring(0, 50) + "...";
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
        SafeTensorsHeader.Parsed header = SafeTensorsHeader.parse(file, seg, DTYPE_BYTES);
        List<Info> infos = new ArrayList<>();
        for (SafeTensorsHeader.Tensor t : header.tensors()) {
            infos.add(new Info(t.name(), file, Dtype.valueOf(t.dtype()), t.shape(), t.offset(), t.bytes()));
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
}
