// NativeLibraryTest.java — loading libdrmas leaves nothing behind (issue 20: every JVM start used to
// leave a 2.3 MB /tmp/drmas-native* folder): from the build tree (or -Ddrmas.native.path) the library
// is loaded where it is; from a jar it is extracted once into a cache folder named by its hash and
// reused, a damaged copy is replaced, and two fresh JVMs started on a real jar share one copy and
// create no temp folder.
package dev.drmas.bindings;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.OutputStream;
import java.net.URI;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NativeLibraryTest {
    @TempDir
    Path dir;

    /**
     * The library file this JVM loads in place: the one -Ddrmas.native.path names where it is set (the
     * emulated CUDA run, and bench/gpu-check.sh, whose carried classes hold no packed copy), else the
     * build tree's packed copy (target/classes). The jar tests pack its bytes.
     */
    static Path built() throws Exception {
        Path configured = NativeLibrary.configured();
        if (configured != null) return configured;
        URL url = NativeLibrary.class.getResource(NativeLibrary.RESOURCE);
        assertNotNull(url, NativeLibrary.RESOURCE + " is not on the class path and -D" + NativeLibrary.PATH_PROPERTY + " is not set");
        return Path.of(url.toURI());
    }

    Path jarWithTheLibrary() throws Exception {
        Path jar = dir.resolve("natives.jar");
        try (OutputStream os = Files.newOutputStream(jar); JarOutputStream j = new JarOutputStream(os)) {
            j.putNextEntry(new JarEntry(NativeLibrary.RESOURCE.substring(1)));
            j.write(Files.readAllBytes(built()));
            j.closeEntry();
        }
        return jar;
    }

    static List<Path> tempNativeFolders(Path tmp) throws Exception {
        try (Stream<Path> s = Files.list(tmp)) {
            return s.filter(p -> p.getFileName().toString().startsWith("drmas-native")).toList();
        }
    }

    @Test
    void theBuildTreesLibraryIsLoadedInPlace() throws Exception {
        assertEquals(built(), NativeLibrary.get().path(), "a library that is a file already needs no copy");
    }

    @Test
    void aJarsLibraryIsExtractedOnceByContent() throws Exception {
        URL url = URI.create("jar:" + jarWithTheLibrary().toUri() + "!" + NativeLibrary.RESOURCE).toURL();
        Path cache = dir.resolve("cache");
        Path first = NativeLibrary.extract(url, cache);
        long stamp = Files.getLastModifiedTime(first).toMillis();
        Object inode = Files.readAttributes(first, java.nio.file.attribute.BasicFileAttributes.class).fileKey();
        Path second = NativeLibrary.extract(url, cache);
        assertEquals(first, second);
        assertEquals(inode, Files.readAttributes(second, java.nio.file.attribute.BasicFileAttributes.class).fileKey(),
                "an intact copy is reused, not rewritten");
        assertArrayEquals(Files.readAllBytes(built()), Files.readAllBytes(first));
        // readable by the other users of a shared cache, as a plainly written file (its temporary file was 0600)
        assertTrue(Files.getPosixFilePermissions(first).containsAll(java.nio.file.attribute.PosixFilePermissions.fromString("rw-r--r--")),
                Files.getPosixFilePermissions(first).toString());
        try (Stream<Path> s = Files.walk(cache)) {
            assertEquals(1, s.filter(Files::isRegularFile).count(), "one file in the cache, no temporary left");
        }
        assertTrue(Files.getLastModifiedTime(second).toMillis() >= stamp, "a reused copy is marked as used");
        Files.writeString(first, "damaged");
        assertArrayEquals(Files.readAllBytes(built()), Files.readAllBytes(NativeLibrary.extract(url, cache)), "a damaged copy is replaced");

        // copies of other builds go once unused for KEEP_DAYS, when a new one is extracted
        Path stale = Files.createDirectories(cache.resolve("0000000000000000")).resolve("libdrmas.so");
        Path recent = Files.createDirectories(cache.resolve("1111111111111111")).resolve("libdrmas.so");
        Files.writeString(stale, "old build");
        Files.writeString(recent, "other build");
        Files.setLastModifiedTime(stale, java.nio.file.attribute.FileTime.from(java.time.Instant.now().minus(
                java.time.Duration.ofDays(NativeLibrary.KEEP_DAYS + 1))));
        Files.delete(first);
        NativeLibrary.extract(url, cache);
        assertTrue(!Files.exists(stale.getParent()) && Files.exists(recent), "stale copies pruned, recent ones kept");
    }

    @Test
    void freshJvmsShareOneCopyAndLeaveNoTemporaryFolder() throws Exception {
        Path jar = jarWithTheLibrary();
        Path cache = dir.resolve("cache");
        Path tmp = Files.createDirectories(dir.resolve("tmp"));  // the children's java.io.tmpdir: other JVMs cannot add to it
        String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        // the jar first on the class path, so the resource comes from it and not from target/classes;
        // then where the probe and the bindings were loaded from (not java.class.path, which under
        // JUnit's console launcher, as in bench/gpu-check.sh, names the launcher only)
        String cp = String.join(java.io.File.pathSeparator, jar.toString(), codeSource(LoadProbe.class), codeSource(NativeLibrary.class));
        String[] paths = new String[2];
        for (int i = 0; i < 2; i++) {
            Process p = new ProcessBuilder(javaBin, "--enable-native-access=ALL-UNNAMED", "-D" + NativeLibrary.CACHE_PROPERTY + "=" + cache,
                    "-Djava.io.tmpdir=" + tmp,
                    "-cp", cp, LoadProbe.class.getName()).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            assertEquals(0, p.waitFor(), out);
            paths[i] = out.lines().reduce((a, b) -> b).orElse("");
        }
        assertTrue(paths[0].startsWith(cache.toString()), paths[0]);
        assertEquals(paths[0], paths[1], "the second JVM reuses the first one's copy");
        assertEquals(List.of(), tempNativeFolders(tmp), "no drmas-native* temporary folder was made");
    }

    static String codeSource(Class<?> c) throws Exception {
        return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }

    /** Loads the library in a fresh JVM and prints where it came from. */
    public static final class LoadProbe {
        public static void main(String[] args) {
            System.out.println(LibDrmas.version() != null ? NativeLibrary.get().path() : "no version");
        }
    }
}
