// CheckpointReplaceTest.java — Checkpoints.replaceFolder, the swap that puts a complete folder (a
// checkpoint, a KL reference) in place of an older one: the old one is renamed aside before the new
// one is renamed in, so that a kill between the two renames leaves a complete copy, which listing
// and resume find and the next save or start tidies; and a failed save says whether its temporary
// folder could be removed.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointReplaceTest {
    @TempDir
    Path dir;

    /** A folder of {@code files} (name, text), with a trainer state when {@code complete}. */
    private static Path folder(Path p, boolean complete, String... files) throws IOException {
        Files.createDirectories(p);
        for (int i = 0; i < files.length; i += 2) Files.writeString(p.resolve(files[i]), files[i + 1]);
        if (complete) Files.writeString(p.resolve(Checkpoints.STATE_FILE), "{\"step\": 5}");
        return p;
    }

    private static Set<String> names(Path p) throws IOException {
        try (Stream<Path> s = Files.list(p)) {
            return s.map(x -> x.getFileName().toString()).collect(Collectors.toSet());
        }
    }

    @Test
    void anExistingFolderIsReplacedWholeAndNoAsideCopyRemains() throws IOException {
        Path root = dir.resolve("checkpoints"), dest = folder(root.resolve("step_000005"), true, "a.txt", "old", "only-old.txt", "x");
        Path tmp = root.resolve("step_000005.tmp");
        Checkpoints.replaceFolder(tmp, dest, "the checkpoint of step 5", into -> {
            Files.writeString(into.resolve("a.txt"), "new");
            Files.writeString(into.resolve(Checkpoints.STATE_FILE), "{\"step\": 5}");
        });
        assertEquals(Set.of("a.txt", Checkpoints.STATE_FILE), names(dest));
        assertEquals("new", Files.readString(dest.resolve("a.txt")));
        assertEquals(Set.of("step_000005"), names(root), "no temporary or aside folder left");
    }

    /**
     * A kill between the two renames (the old folder aside, the new one not yet in place): the aside
     * copy is the checkpoint of its step for listing and resume (the complete temporary folder is
     * removed at the next start, as any unfinished save's is), and the next save of that step puts
     * its folder in place and removes the aside copy.
     */
    @Test
    void aKillBetweenTheRenamesLeavesACheckpointThatIsFoundAndLaterTidied() throws IOException {
        Path root = dir.resolve("checkpoints");
        folder(root.resolve("step_000003"), true, "a.txt", "three");
        Path aside = folder(root.resolve("step_000005.old"), true, "a.txt", "old");
        folder(root.resolve("step_000005.tmp"), true, "a.txt", "new, not yet renamed");
        Checkpoints cps = new Checkpoints(root);
        assertEquals(List.of(root.resolve("step_000003"), aside), cps.complete());
        assertEquals(aside, cps.latest().orElseThrow(), "resume takes step 5, not the one before it");
        assertEquals(5, Checkpoints.stepOf(aside));

        assertEquals(List.of(root.resolve("step_000005.tmp")), cps.removeUnfinished());
        assertEquals(Set.of("step_000003", "step_000005.old"), names(root), "the only copy of step 5 is kept");
        assertEquals(aside, cps.latest().orElseThrow());

        Path dest = root.resolve("step_000005");
        Checkpoints.replaceFolder(root.resolve("step_000005.tmp"), dest, "the checkpoint of step 5", into -> {
            Files.writeString(into.resolve("a.txt"), "saved again");
            Files.writeString(into.resolve(Checkpoints.STATE_FILE), "{\"step\": 5}");
        });
        assertEquals("saved again", Files.readString(dest.resolve("a.txt")));
        assertEquals(Set.of("step_000003", "step_000005"), names(root));
        assertEquals(List.of(root.resolve("step_000003"), dest), cps.complete());
    }

    /**
     * A kill after the second rename, before the aside copy was deleted (or a deletion that failed):
     * the folder in place is the checkpoint; the aside copy is removed by the next start and by the
     * next replacement, and is never listed beside it.
     */
    @Test
    void aLeftoverAsideCopyBesideItsFolderIsRemoved() throws IOException {
        Path root = dir.resolve("checkpoints");
        Path dest = folder(root.resolve("step_000005"), true, "a.txt", "new");
        Path aside = folder(root.resolve("step_000005.old"), true, "a.txt", "old");
        folder(root.resolve("step_000007.old"), false, "a.txt", "half deleted");  // no state file: not a checkpoint
        Checkpoints cps = new Checkpoints(root);
        assertEquals(List.of(dest), cps.complete());
        assertEquals(List.of(aside, root.resolve("step_000007.old")), cps.removeUnfinished());
        assertEquals(Set.of("step_000005"), names(root));

        // the same left by a kill, and the next replacement of the folder
        folder(aside, true, "a.txt", "old");
        Checkpoints.replaceFolder(root.resolve("step_000005.tmp"), dest, "the checkpoint of step 5", into -> {
            Files.writeString(into.resolve(Checkpoints.STATE_FILE), "{\"step\": 5}");
        });
        assertEquals(Set.of("step_000005"), names(root));
        assertEquals(Set.of(Checkpoints.STATE_FILE), names(dest));
    }

    /**
     * A save that fails and whose temporary folder cannot be removed either (a file in it made
     * immutable: root deletes anything else) says so and why, not "removed".
     */
    @Test
    void aTemporaryFolderThatCannotBeRemovedIsNotCalledRemoved() throws Exception {
        Path root = dir.resolve("checkpoints"), tmp = root.resolve("step_000005.tmp"), stuck = tmp.resolve("stuck.txt");
        Path probe = Files.writeString(dir.resolve("probe"), "x");
        assumeTrue(chattr("+i", probe) && chattr("-i", probe), "chattr +i needs root and ext2/3/4; skipped");
        try {
            IOException e = assertThrows(IOException.class, () -> Checkpoints.replaceFolder(tmp, root.resolve("step_000005"),
                    "the checkpoint of step 5", into -> {
                        Files.writeString(stuck, "x");
                        if (!chattr("+i", stuck)) throw new IllegalStateException("chattr +i " + stuck + " failed");
                        throw new IOException("disk full (simulated)");
                    }));
            assertTrue(e.getMessage().startsWith("cannot write the checkpoint of step 5 (in " + tmp + "; not removed: " + stuck + ": "),
                    e.getMessage());
            assertTrue(e.getMessage().endsWith("): disk full (simulated)"), e.getMessage());
            assertTrue(Files.exists(stuck));
        } finally {
            if (Files.exists(stuck)) chattr("-i", stuck);
        }
    }

    private static boolean chattr(String flag, Path p) throws IOException {
        Process c = new ProcessBuilder("chattr", flag, p.toString()).redirectErrorStream(true).start();
        c.getInputStream().readAllBytes();
        try {
            return c.waitFor() == 0;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(e);
        }
    }
}
