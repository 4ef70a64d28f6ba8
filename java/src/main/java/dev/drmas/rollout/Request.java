// Request.java — one prompt to continue. The stream id keys the request's random draws, so the
// same (seed, stream) gives the same tokens whatever batch the request is generated in; the
// trainer uses a stable id per (step, uid, rollout).
package dev.drmas.rollout;

public record Request(int[] promptIds, long stream) {
    public Request {
        if (promptIds == null || promptIds.length == 0) {
            throw new IllegalArgumentException("a prompt needs at least one token (stream " + stream + ")");
        }
    }
}
