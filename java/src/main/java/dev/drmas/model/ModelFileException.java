// ModelFileException.java — a model file (config.json, a safetensors file or its index) that drmas
// cannot use. The message names the file and the key path or tensor, so that it can be shown to
// the user as it is.
package dev.drmas.model;

public final class ModelFileException extends RuntimeException {
    public ModelFileException(String message) {
        super(message);
    }

    public ModelFileException(String message, Throwable cause) {
        super(message, cause);
    }
}
