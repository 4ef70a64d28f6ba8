// InvalidActionPenaltyTest.java — a row's score is its episode reward, minus the penalty when the
// row's own output was malformed, for the reference penalty and others; bad penalties and
// non-finite rewards are rejected with the key named.
package dev.drmas.workflow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class InvalidActionPenaltyTest {
    @Test
    void rowScoreIsRewardMinusPenaltyForInvalidRows() {
        InvalidActionPenalty r = new InvalidActionPenalty(0.1);
        assertEquals(1.0, r.rowScore(1.0, true));
        assertEquals(0.9, r.rowScore(1.0, false), 1e-15);
        assertEquals(0.0, r.rowScore(0.0, true));
        assertEquals(-0.1, r.rowScore(0.0, false), 1e-15);

        InvalidActionPenalty strict = new InvalidActionPenalty(0.5);
        assertEquals(0.5, strict.rowScore(1.0, false));
        assertEquals(-0.5, strict.rowScore(0.0, false));
        assertEquals(1.0, new InvalidActionPenalty(0.0).rowScore(1.0, false));
    }

    @Test
    void badPenaltyAndRewardAreRejected() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new InvalidActionPenalty(-0.1));
        assertEquals("invalid_penalty must be a finite number >= 0, got -0.1", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new InvalidActionPenalty(Double.NaN));
        assertThrows(IllegalArgumentException.class, () -> new InvalidActionPenalty(0.1).rowScore(Double.POSITIVE_INFINITY, true));
    }
}
