// SafeTensorsStreamWriter.java — a safetensors file, or a save_pretrained folder of them, whose
// tensors arrive in pieces and in any order (the optimiser state a sharded checkpoint gathers window
// by window): the header is computed up front from the tensors' names, dtypes and shapes, and each
// piece goes to its place by a positional write, so the writer holds nothing but the piece it is
// handed. The files are SafeTensorsWriter's, byte for byte, for the same tensors.
package dev.drmas.model;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;

public final class SafeTensorsStreamWriter implements AutoCloseable {
    /** Where one tensor's bytes go: {@code start} is its first byte in {@code file}. */
    private record Place(SafeTensorsWriter.Spec spec, Path file, FileChannel ch, long start) {
    }

    private final Map<String, Place> places = new LinkedHashMap<>();
    private final Map<String, Long> written = new HashMap<>();
    private final List<FileChannel> channels = new ArrayList<>();

    private SafeTensorsStreamWriter() {
    }

    /** Creates {@code file} with the header of {@code tensors}; their bytes follow through {@link #put}. */
    public static SafeTensorsStreamWriter file(Path file, List<SafeTensorsWriter.Spec> tensors) throws IOException {
        SafeTensorsStreamWriter w = new SafeTensorsStreamWriter();
        try {
            w.open(file, tensors);
            return w;
        } catch (IOException | RuntimeException e) {
            w.close();
            throw e;
        }
    }

    /**
     * Creates the files of {@link SafeTensorsWriter#writeCheckpoint} in {@code dir} for {@code
     * tensors} (in their order, which decides the shards), headers and index included; the tensors'
     * bytes follow through {@link #put}. Weight files of an earlier save in {@code dir} are removed.
     */
    public static SafeTensorsStreamWriter checkpoint(Path dir, List<SafeTensorsWriter.Spec> tensors, long maxShardBytes)
            throws IOException {
        Map<String, Long> bytes = new LinkedHashMap<>();
        Map<String, SafeTensorsWriter.Spec> byName = new HashMap<>();
        long parameters = 0, total = 0;
        for (SafeTensorsWriter.Spec s : tensors) {
            if (byName.put(s.name(), s) != null) throw new IllegalArgumentException(dir + ": tensor '" + s.name() + "' twice");
            bytes.put(s.name(), s.bytes());
            parameters += s.numel();
            total += s.bytes();
        }
        List<List<String>> shards = SafeTensorsWriter.shardPlan(bytes, maxShardBytes);
        List<String> files = SafeTensorsWriter.shardFileNames(shards.size());
        SafeTensorsStreamWriter w = new SafeTensorsStreamWriter();
        try {
            Files.createDirectories(dir);
            SafeTensorsWriter.removeWeightFiles(dir);
            for (int i = 0; i < shards.size(); i++) {
                List<SafeTensorsWriter.Spec> specs = new ArrayList<>();
                for (String name : shards.get(i)) specs.add(byName.get(name));
                w.open(dir.resolve(files.get(i)), specs);
            }
            if (shards.size() > 1) SafeTensorsWriter.writeIndex(dir, shards, files, parameters, total);
            return w;
        } catch (IOException | RuntimeException e) {
            w.close();
            throw e;
        }
    }

    private void open(Path file, List<SafeTensorsWriter.Spec> tensors) throws IOException {
        SafeTensorsWriter.Layout layout = SafeTensorsWriter.layout(file, tensors);
        FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        channels.add(ch);
        SafeTensorsWriter.writeFully(ch, ByteBuffer.wrap(layout.head()));
        for (int i = 0; i < layout.order().size(); i++) {
            SafeTensorsWriter.Spec s = layout.order().get(i);
            places.put(s.name(), new Place(s, file, ch, layout.start()[i]));
            written.put(s.name(), 0L);
        }
    }

    /**
     * Writes {@code values} (its elements in row-major order; on any device, in the tensor's dtype)
     * as elements [first, first + values.numel()) of tensor {@code name}, flattened. Pieces of a
     * tensor must not overlap; together they must cover it before {@link #finish}.
     */
    public void put(String name, long first, Tensor values) throws IOException {
        Place p = places.get(name);
        if (p == null) throw new IllegalArgumentException("no tensor '" + name + "' in " + String.join(", ", files()));
        SafeTensors.Dtype d = SafeTensors.Dtype.of(values.scalar_type().intern());
        if (d != p.spec().dtype()) {
            throw new IllegalArgumentException(p.file() + ": tensor '" + name + "' is " + p.spec().dtype() + ", a piece of it is "
                    + (d == null ? values.scalar_type().intern() : d));
        }
        long n = values.numel(), numel = p.spec().numel();
        if (first < 0 || n > numel - first) {
            throw new IllegalArgumentException(p.file() + ": a piece of " + n + " elements at element " + first + " of tensor '" + name
                    + "', which has " + numel);
        }
        if (n == 0) return;
        // to the host a slice at a time where the piece is not there already (SafeTensorsWriter's loop)
        long bytes = SafeTensorsWriter.writeValues(p.ch(), p.start() + first * d.bytes(), values);
        written.merge(name, bytes, Long::sum);
    }

    /**
     * Checks that every tensor was written whole and closes the files (their sync is the caller's:
     * a checkpoint syncs its whole folder before the rename that publishes it).
     */
    public void finish() throws IOException {
        for (Place p : places.values()) {
            long w = written.get(p.spec().name());
            if (w != p.spec().bytes()) {
                throw new IllegalStateException(p.file() + ": tensor '" + p.spec().name() + "' got " + w + " of its " + p.spec().bytes()
                        + " bytes");
            }
        }
        close();
    }

    private List<String> files() {
        List<String> out = new ArrayList<>();
        for (Place p : places.values()) if (!out.contains(p.file().toString())) out.add(p.file().toString());
        return out;
    }

    /** Closes the files, complete or not (a failed checkpoint's folder is removed by its writer). */
    @Override
    public void close() throws IOException {
        IOException first = null;
        for (FileChannel ch : channels) {
            try {
                ch.close();
            } catch (IOException e) {
                if (first == null) first = e;
                else first.addSuppressed(e);
            }
        }
        channels.clear();
        if (first != null) throw first;
    }
}
