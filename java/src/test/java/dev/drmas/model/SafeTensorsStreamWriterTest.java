// SafeTensorsStreamWriterTest.java — a file (and a save_pretrained folder, one file or shards with
// their index) written from pieces that arrive in a shuffled order is SafeTensorsWriter's, byte for
// byte, for the same tensors of three dtypes and awkward shapes (a scalar, an empty one, primes);
// what a mapped file's ranged read returns; a tensor written slice by slice (as one off the CPU
// goes to the host) is its bytes whatever the slice; and a missing, stray or mistyped piece is an
// error naming the file and the tensor.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.testing.TorchScope;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

@ExtendWith(TorchScope.class)
class SafeTensorsStreamWriterTest {
    @TempDir
    Path dir;

    /** Tensors of three dtypes in an order that is not the file's (by dtype, then name). */
    private static Map<String, Tensor> tensors() {
        torch.manual_seed(7);
        Map<String, Tensor> m = new LinkedHashMap<>();
        m.put("z.weight", torch.randn(new long[] {13, 7}));
        m.put("a.half", torch.randn(new long[] {5, 3, 2}).to(ScalarType.Half));
        m.put("scalar", torch.randn(new long[] {}));
        m.put("empty", torch.randn(new long[] {0, 3}));
        m.put("m.bf16", torch.randn(new long[] {101}).to(ScalarType.BFloat16));
        m.put("b.bias", torch.randn(new long[] {1, 31}));
        m.put("large", torch.randn(new long[] {257, 3}));
        return m;
    }

    private static List<SafeTensorsWriter.Spec> specs(Map<String, Tensor> m) {
        List<SafeTensorsWriter.Spec> out = new ArrayList<>();
        m.forEach((k, t) -> {
            long[] shape = new long[(int) t.dim()];
            for (int i = 0; i < shape.length; i++) shape[i] = t.size(i);
            out.add(new SafeTensorsWriter.Spec(k, SafeTensors.Dtype.of(t.scalar_type().intern()), shape));
        });
        return out;
    }

    @Test
    void aTensorWrittenSliceBySliceIsItsBytesWhateverTheSlice() throws Exception {
        // the writers' one loop passes a tensor that is not the CPU's to the host in slices of
        // SLICE bytes (64 MiB): here cut small, so that slices end inside elements' bytes, past
        // the tensor's end and in the middle of a transposed matrix's rows
        Map<String, Tensor> m = tensors();
        m.put("transposed", torch.randn(new long[] {11, 9}).to(ScalarType.BFloat16).t());
        for (Map.Entry<String, Tensor> e : m.entrySet()) {
            Tensor c = e.getValue().contiguous();
            int n = Math.toIntExact(c.numel() * c.element_size());
            byte[] want = new byte[3 + n];
            if (n > 0) MemorySegment.copy(MemorySegment.ofAddress(c.data_ptr().address()).reinterpret(n), 0, MemorySegment.ofArray(want), 3, n);
            for (long slice : new long[] {1, 2, 5, 6, 64, SafeTensorsWriter.SLICE}) {
                Path f = dir.resolve(e.getKey() + "-" + slice);
                try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
                    ch.write(ByteBuffer.wrap(new byte[3]));
                    assertEquals(n, SafeTensorsWriter.writeValues(ch, 3, e.getValue(), slice), e.getKey() + " in slices of " + slice);
                }
                assertArrayEquals(want, Files.readAllBytes(f), e.getKey() + " in slices of " + slice);
            }
        }
    }

    /** Every tensor cut into pieces of 1 to 17 elements, all of them put in a shuffled order. */
    private static void putShuffled(SafeTensorsStreamWriter w, Map<String, Tensor> m, long seed) throws Exception {
        record Piece(String name, long first, long n) {
        }
        Random rnd = new Random(seed);
        List<Piece> pieces = new ArrayList<>();
        m.forEach((k, t) -> {
            for (long at = 0; at < t.numel(); ) {
                long n = Math.min(t.numel() - at, 1 + rnd.nextInt(17));
                pieces.add(new Piece(k, at, n));
                at += n;
            }
        });
        Collections.shuffle(pieces, rnd);
        for (Piece p : pieces) w.put(p.name(), p.first(), m.get(p.name()).reshape(-1).narrow(0, p.first(), p.n()));
    }

    @Test
    void piecesInAnyOrderMakeTheWritersFile() throws Exception {
        Map<String, Tensor> m = tensors();
        Path want = dir.resolve("want.safetensors"), got = dir.resolve("got.safetensors");
        SafeTensorsWriter.write(want, m);
        try (SafeTensorsStreamWriter w = SafeTensorsStreamWriter.file(got, specs(m))) {
            putShuffled(w, m, 1);
            w.finish();
        }
        assertArrayEquals(Files.readAllBytes(want), Files.readAllBytes(got));
    }

    @Test
    void piecesInAnyOrderMakeTheWritersCheckpointFolder() throws Exception {
        Map<String, Tensor> m = tensors();
        // 600 bytes: several shards, "large" (3,084 bytes) in one of its own; 1 MB: one file
        for (long max : new long[] {600, 1 << 20}) {
            Path want = dir.resolve("want" + max), got = dir.resolve("got" + max);
            List<Path> files = SafeTensorsWriter.writeCheckpoint(want, m, max);
            assertEquals(max == 600, files.size() > 2, files.toString());
            try (SafeTensorsStreamWriter w = SafeTensorsStreamWriter.checkpoint(got, specs(m), max)) {
                putShuffled(w, m, max);
                w.finish();
            }
            assertEquals(names(want), names(got));
            for (String f : names(want)) assertArrayEquals(Files.readAllBytes(want.resolve(f)), Files.readAllBytes(got.resolve(f)), f);
        }
    }

    private static List<String> names(Path d) throws Exception {
        try (Stream<Path> s = Files.list(d)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void aRangedReadTakesThoseElementsOnly() throws Exception {
        Map<String, Tensor> m = tensors();
        Path f = dir.resolve("t.safetensors");
        SafeTensorsWriter.write(f, m);
        try (SafeTensors st = SafeTensors.open(f)) {
            // elements [20, 51) of the bf16 tensor, converted into float32, and of a 2-D one
            Tensor into = torch.zeros(new long[] {31});
            st.read("m.bf16", 20, into);
            assertArrayEquals(Tensors.toFloats(m.get("m.bf16").to(ScalarType.Float).narrow(0, 20, 31)), Tensors.toFloats(into));
            Tensor part = torch.zeros(new long[] {3, 4}, new TensorOptions(ScalarType.Double));
            st.read("z.weight", 79, part);
            assertArrayEquals(Tensors.toFloats(m.get("z.weight").reshape(-1).narrow(0, 79, 12)),
                    Tensors.toFloats(part.to(ScalarType.Float).reshape(-1)));
            ModelFileException e = assertThrows(ModelFileException.class, () -> st.read("b.bias", 20, torch.zeros(new long[] {12})));
            assertTrue(e.getMessage().contains(f + ": tensor 'b.bias' has 31 elements; elements [20, 32)"), e.getMessage());
        }
    }

    @Test
    void missingStrayAndMistypedPiecesAreErrorsNamingTheTensor() throws Exception {
        Map<String, Tensor> m = tensors();
        Path f = dir.resolve("bad.safetensors");
        try (SafeTensorsStreamWriter w = SafeTensorsStreamWriter.file(f, specs(m))) {
            IllegalArgumentException out = assertThrows(IllegalArgumentException.class, () -> w.put("b.bias", 30, torch.zeros(2)));
            assertEquals(f + ": a piece of 2 elements at element 30 of tensor 'b.bias', which has 31", out.getMessage());
            IllegalArgumentException type = assertThrows(IllegalArgumentException.class,
                    () -> w.put("m.bf16", 0, torch.zeros(2)));
            assertEquals(f + ": tensor 'm.bf16' is BF16, a piece of it is F32", type.getMessage());
            IllegalArgumentException none = assertThrows(IllegalArgumentException.class, () -> w.put("nope", 0, torch.zeros(2)));
            assertEquals("no tensor 'nope' in " + f, none.getMessage());
            m.remove("large");
            putShuffled(w, m, 3);
            IllegalStateException missing = assertThrows(IllegalStateException.class, w::finish);
            assertEquals(f + ": tensor 'large' got 0 of its 3084 bytes", missing.getMessage());
        }
    }

    /** The open file descriptors of this process that name {@code f} (Linux). */
    private static long openDescriptors(Path f) throws Exception {
        Path target = f.toAbsolutePath();
        try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            return s.filter(p -> {
                try {
                    return Files.readSymbolicLink(p).equals(target);
                } catch (Exception gone) {  // the listing's own descriptor, closed since
                    return false;
                }
            }).count();
        }
    }

    @Test
    void finishAndCloseLetGoOfTheFiles() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isDirectory(Path.of("/proc/self/fd")), "Linux's /proc");
        Map<String, Tensor> m = tensors();
        Path f = dir.resolve("done.safetensors"), g = dir.resolve("abandoned.safetensors");
        SafeTensorsStreamWriter w = SafeTensorsStreamWriter.file(f, specs(m));
        assertEquals(1, openDescriptors(f));  // (the check sees a descriptor where there is one)
        putShuffled(w, m, 5);
        w.finish();
        assertEquals(0, openDescriptors(f));
        SafeTensorsStreamWriter v = SafeTensorsStreamWriter.file(g, specs(m));
        v.close();
        v.close();  // twice: nothing left to close
        assertEquals(0, openDescriptors(g));
    }
}
