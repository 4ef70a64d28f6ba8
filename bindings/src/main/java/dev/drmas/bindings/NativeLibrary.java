// NativeLibrary.java — finds and loads libdrmas once per process: from -Ddrmas.native.path
// (the .so or its folder) when set, else from the copy packed with the bindings classes. In a
// built tree (target/classes) that copy is a file and is loaded where it is; inside a jar it is
// extracted once to a cache folder named by its SHA-256 (-Ddrmas.native.cache, else
// $XDG_CACHE_HOME/drmas/native or ~/.cache/drmas/native) and reused by every later process, since
// the dynamic loader needs a real path. (Extracting to a new temporary folder per process left a
// 2.3 MB /tmp/drmas-native* folder behind at every start.)
package dev.drmas.bindings;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** The loaded libdrmas and where it came from. */
public final class NativeLibrary {
    public static final String PATH_PROPERTY = "drmas.native.path";
    public static final String CACHE_PROPERTY = "drmas.native.cache";
    /** Cached copies of other builds unused this long are removed. */
    static final int KEEP_DAYS = 14;
    static final String RESOURCE = "/native/linux-x86_64/libdrmas.so";
    private static final System.Logger LOG = System.getLogger("dev.drmas.bindings");

    private static volatile NativeLibrary instance;

    private final Path path;
    private final SymbolLookup lookup;

    private NativeLibrary(Path path) {
        this.path = path;
        // Arena.global(): the library stays mapped for the life of the process, as every
        // downcall handle made from it must stay valid.
        this.lookup = SymbolLookup.libraryLookup(path, Arena.global());
    }

    /** The process-wide library, loaded on first use. */
    public static NativeLibrary get() {
        NativeLibrary lib = instance;
        if (lib == null) {
            synchronized (NativeLibrary.class) {
                lib = instance;
                if (lib == null) {
                    lib = new NativeLibrary(locate());
                    LOG.log(System.Logger.Level.DEBUG, "libdrmas loaded from " + lib.path);
                    instance = lib;
                }
            }
        }
        return lib;
    }

    public Path path() {
        return path;
    }

    SymbolLookup lookup() {
        return lookup;
    }

    /** The library that -Ddrmas.native.path names (absolute), or null where it is not set. */
    static Path configured() {
        String configured = System.getProperty(PATH_PROPERTY);
        if (configured == null || configured.isBlank()) return null;
        Path p = Path.of(configured);
        if (Files.isDirectory(p)) p = p.resolve("libdrmas.so");
        if (!Files.isRegularFile(p)) {
            throw new IllegalStateException("-D" + PATH_PROPERTY + "=" + configured + ": no libdrmas.so there");
        }
        return p.toAbsolutePath();
    }

    private static Path locate() {
        Path configured = configured();
        if (configured != null) return configured;
        if (!System.getProperty("os.name", "").toLowerCase().contains("linux")
                || !System.getProperty("os.arch", "").matches("amd64|x86_64")) {
            throw new IllegalStateException("libdrmas is packed for linux-x86_64 only; this is "
                    + System.getProperty("os.name") + "/" + System.getProperty("os.arch")
                    + ". Build it with CMake and pass -D" + PATH_PROPERTY + "=<build folder>");
        }
        URL url = NativeLibrary.class.getResource(RESOURCE);
        if (url == null) {
            throw new IllegalStateException("libdrmas.so is not in the bindings jar (" + RESOURCE
                    + "); build with `mvn package` or pass -D" + PATH_PROPERTY);
        }
        if (url.getProtocol().equals("file")) {
            try {
                return Path.of(url.toURI());  // the build tree: nothing to extract
            } catch (URISyntaxException | IllegalArgumentException e) {
                // an odd URL: extract it like a jar's
            }
        }
        return extract(url, cacheRoot());
    }

    /** Where extracted copies go (a folder per content hash below it). */
    static Path cacheRoot() {
        String configured = System.getProperty(CACHE_PROPERTY);
        if (configured != null && !configured.isBlank()) return Path.of(configured);
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("drmas").resolve("native");
    }

    /**
     * The library at {@code url} as a file {@code root}/SHA/libdrmas.so, written (through a
     * temporary file and a rename, so that concurrent starts never see half a library) only when
     * no intact copy is there. Falls back to a temporary folder deleted at exit when the cache
     * cannot be written.
     */
    static Path extract(URL url, Path root) {
        byte[] bytes;
        try (InputStream in = url.openStream()) {
            bytes = in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + url, e);
        }
        String hash = sha256(bytes);
        Path dir = root.resolve(hash.substring(0, 16));
        Path file = dir.resolve("libdrmas.so");
        try {
            if (Files.isRegularFile(file) && Files.size(file) == bytes.length && sha256(Files.readAllBytes(file)).equals(hash)) {
                Files.setLastModifiedTime(file, FileTime.from(Instant.now()));  // in use: prune() keeps it
                return file;
            }
            Files.createDirectories(dir);
            // a name of its own (created new): a pid is not unique across containers that share the cache, and a
            // second start truncating the file the first just renamed in would hand it half a library
            Path tmp = Files.createTempFile(dir, "libdrmas.so.", ".tmp");
            try {  // readable by other users sharing the cache, as a file written plainly is (a temporary file is 0600)
                Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rw-r--r--"));
            } catch (UnsupportedOperationException notPosix) {
                // the file system's own defaults
            }
            Files.write(tmp, bytes);
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            prune(root, dir);
            return file;
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "cannot use the native cache " + root + " (" + e + "); extracting to a temporary folder");
            return extractTemporary(bytes);
        }
    }

    /**
     * Removes the copies of other builds that no process has used for {@link #KEEP_DAYS} days, so
     * that rebuilding does not grow the cache without end (a process still using one keeps its
     * mapping: Linux removes the name, not the pages).
     */
    private static void prune(Path root, Path keep) {
        Instant cutoff = Instant.now().minus(Duration.ofDays(KEEP_DAYS));
        try (DirectoryStream<Path> dirs = Files.newDirectoryStream(root)) {
            for (Path d : dirs) {
                Path lib = d.resolve("libdrmas.so");
                if (d.equals(keep) || !Files.isRegularFile(lib) || Files.getLastModifiedTime(lib).toInstant().isAfter(cutoff)) continue;
                try (DirectoryStream<Path> files = Files.newDirectoryStream(d)) {
                    for (Path f : files) Files.deleteIfExists(f);
                }
                Files.deleteIfExists(d);
            }
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "pruning " + root + ": " + e);  // only space is at stake
        }
    }

    private static Path extractTemporary(byte[] bytes) {
        try {
            Path dir = Files.createTempDirectory("drmas-native");
            Path file = dir.resolve("libdrmas.so");
            // deleteOnExit runs in reverse order of registration: the file first, then its folder
            dir.toFile().deleteOnExit();
            file.toFile().deleteOnExit();
            Files.write(file, bytes);
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot extract libdrmas.so to a temporary folder", e);
        }
    }

    private static String sha256(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);  // every JDK has SHA-256
        }
    }
}
