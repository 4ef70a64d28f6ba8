// TokenBroadcast.java — spreads one value per row (an advantage) over the row's response
// tokens in the packed token array (the kernel drmas_broadcast_rows_f32). API only: training fills
// each row's tokens itself while it packs a micro-batch.
package dev.drmas.algo;

import dev.drmas.bindings.Backend;
import dev.drmas.bindings.Kernels;
import java.lang.foreign.MemorySegment;

public final class TokenBroadcast {
    private TokenBroadcast() {}

    /** Token t of row r (offsets[r] &lt;= t &lt; offsets[r+1]) gets rowValues[r]; other tokens 0. */
    public static float[] rows(float[] rowValues, long[] offsets, int numTokens) {
        TensorViews.requireSameLength("rowValues + 1", rowValues.length + 1, "offsets", offsets.length);
        float[] out = new float[numTokens];
        Kernels.broadcastRows(Backend.CPU, rowValues.length, MemorySegment.ofArray(rowValues),
                MemorySegment.ofArray(offsets), numTokens, MemorySegment.ofArray(out), null);
        return out;
    }
}
