// NativeLibrary.java — finds and loads libdrmas once per process: from -Ddrmas.native.path
// (the .so or its folder) when set, else from the copy packed in the bindings jar, which is
// extracted to a temporary file because the dynamic loader needs a real path.
package dev.drmas.bindings;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/** The loaded libdrmas and where it came from. */
public final class NativeLibrary {
    public static final String PATH_PROPERTY = "drmas.native.path";
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

    private static Path locate() {
        String configured = System.getProperty(PATH_PROPERTY);
        if (configured != null && !configured.isBlank()) {
            Path p = Path.of(configured);
            if (Files.isDirectory(p)) p = p.resolve("libdrmas.so");
            if (!Files.isRegularFile(p)) {
                throw new IllegalStateException("-D" + PATH_PROPERTY + "=" + configured + ": no libdrmas.so there");
            }
            return p.toAbsolutePath();
        }
        if (!System.getProperty("os.name", "").toLowerCase().contains("linux")
                || !System.getProperty("os.arch", "").matches("amd64|x86_64")) {
            throw new IllegalStateException("libdrmas is packed for linux-x86_64 only; this is "
                    + System.getProperty("os.name") + "/" + System.getProperty("os.arch")
                    + ". Build it with CMake and pass -D" + PATH_PROPERTY + "=<build folder>");
        }
        try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("libdrmas.so is not in the bindings jar (" + RESOURCE
                        + "); build with `mvn package` or pass -D" + PATH_PROPERTY);
            }
            Path dir = Files.createTempDirectory("drmas-native");
            Path file = dir.resolve("libdrmas.so");
            Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            file.toFile().deleteOnExit();
            dir.toFile().deleteOnExit();
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot extract libdrmas.so to a temporary folder", e);
        }
    }
}
