// Durable.java — fsync for write-then-rename. A rename is atomic, but without a sync of the new
// files first a power loss can leave the renamed name pointing at empty or partial files (the
// file system may commit the rename before the data); without a sync of the folder afterwards the
// rename itself may be lost. Lucene's IOUtils.fsync does the same (folders are opened read-only
// and forced, which Linux allows). A folder created for such files is synced into its parent too.
package dev.drmas.train;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

public final class Durable {
    private Durable() {
    }

    /** Forces a file's data and metadata to the device. */
    public static void syncFile(Path file) throws IOException {
        // a read-only descriptor may be synced too (POSIX leaves it open, Linux and the BSDs allow it)
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }

    /** Forces a folder's entries (names created, renamed, deleted in it) to the device; a no-op where folders cannot be opened. */
    public static void syncFolder(Path dir) throws IOException {
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        } catch (IOException e) {
            // some systems (not Linux) refuse to open a folder; its entries then reach the disk when the OS decides
            if (!Files.isDirectory(dir)) throw e;
        }
    }

    /**
     * Files.createDirectories, and the new names made durable too: each folder it creates is synced
     * into its parent, or a power loss could drop the whole folder (checkpoints/, the run folder)
     * with everything later written and synced inside it.
     */
    public static void createFolders(Path dir) throws IOException {
        Path abs = dir.toAbsolutePath().normalize(), top = abs;
        if (Files.isDirectory(abs)) return;
        while (top.getParent() != null && !Files.isDirectory(top.getParent())) top = top.getParent();  // the first one to create
        Files.createDirectories(abs);
        // deepest first, up to the folder that was there
        for (Path p = abs; p != null && p.startsWith(top); p = p.getParent()) if (p.getParent() != null) syncFolder(p.getParent());
    }

    /** Syncs every file under {@code root}, then every folder, deepest first. */
    public static void syncTree(Path root) throws IOException {
        List<Path> all;
        try (Stream<Path> s = Files.walk(root)) {
            all = s.sorted(Comparator.reverseOrder()).toList();
        }
        for (Path p : all) if (Files.isRegularFile(p)) syncFile(p);
        for (Path p : all) if (Files.isDirectory(p)) syncFolder(p);
    }
}
