// HeapCounterTest.java — the memory tests' wait for a quiet JIT reads HotSpot's compiler queue:
// the text it parses (as a busy and an idle JVM print it), and that this JVM answers the command,
// so that the wait does not fall back unseen to the compilation-time heuristic.
package dev.drmas.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class HeapCounterTest {
    @Test
    void theCompilerQueueCountsRunningAndQueuedCompilations() {
        String busy = """
                Current compiles:\s
                C2 CompilerThread0  1490   !   4       com.sun.tools.javac.jvm.ClassReader::classSigToType (530 bytes)

                C1 compile queue:
                Empty

                C2 compile queue:
                1485       4       com.sun.tools.javac.util.List$2::next (39 bytes)
                1489       4       com.sun.tools.javac.util.StringNameTable$NameImpl::getUtf8Length (63 bytes)


                """;
        String idle = "Current compiles: \n\nC1 compile queue:\nEmpty\n\nC2 compile queue:\nEmpty\n\n\n";
        assertEquals(3, HeapCounter.countCompilations(busy));
        assertEquals(0, HeapCounter.countCompilations(idle));
        assertEquals(-1, HeapCounter.countCompilations("Unknown diagnostic command"));
    }

    @Test
    void thisJvmAnswersTheCompilerQueueAndTheWaitEnds() {
        assertTrue(HeapCounter.pendingCompilations() >= 0, "HotSpot's compilerQueue diagnostic command is not readable here");
        HeapCounter.awaitQuietJit();  // returns (within its ten seconds) whether or not a compilation starts after
    }
}
