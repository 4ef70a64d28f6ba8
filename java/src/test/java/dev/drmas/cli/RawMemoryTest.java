// RawMemoryTest.java — RawMemory's segments: the size asked for, 16-byte aligned, writable and
// readable from several threads, bounded, and gone with their arena (the free runs at its close).
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class RawMemoryTest {
    @Test
    void segmentsAreSizedAlignedWritableAndFreedWithTheirArena() {
        Arena arena = Arena.ofShared();
        long ints = (3L << 20) + 5;  // not a multiple of anything
        MemorySegment s = RawMemory.allocate(arena, 4 * ints);
        assertEquals(4 * ints, s.byteSize());
        assertEquals(0, s.address() % 16);
        IntStream.range(0, 4).parallel().forEach(t -> {
            for (long i = t; i < ints; i += 4) s.setAtIndex(ValueLayout.JAVA_INT, i, (int) (i * 7));
        });
        long bad = IntStream.range(0, 4).parallel().mapToLong(t -> {
            long b = 0;
            for (long i = t; i < ints; i += 4) if (s.getAtIndex(ValueLayout.JAVA_INT, i) != (int) (i * 7)) b++;
            return b;
        }).sum();
        assertEquals(0, bad);
        assertThrows(IndexOutOfBoundsException.class, () -> s.getAtIndex(ValueLayout.JAVA_INT, ints));
        arena.close();
        assertFalse(s.scope().isAlive());
        assertThrows(IllegalStateException.class, () -> s.get(ValueLayout.JAVA_INT, 0));
    }
}
