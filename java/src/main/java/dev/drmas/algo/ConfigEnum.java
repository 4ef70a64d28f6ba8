// ConfigEnum.java — how the algo enums spell themselves in configs and on the command line
// ("agent-mean", "seq-mean-token-sum"), and one parser that names the valid choices on error.
package dev.drmas.algo;

import java.util.Arrays;
import java.util.stream.Collectors;

/** An enum constant with a config spelling. */
public interface ConfigEnum {
    /** The spelling used in YAML configs and CLI flags. */
    String configName();

    /** The constant of {@code type} spelled {@code text}; the error lists the valid spellings. */
    static <E extends Enum<E> & ConfigEnum> E parse(Class<E> type, String what, String text) {
        for (E e : type.getEnumConstants()) {
            if (e.configName().equalsIgnoreCase(text.trim())) return e;
        }
        String valid = Arrays.stream(type.getEnumConstants()).map(ConfigEnum::configName)
                .collect(Collectors.joining(", "));
        throw new IllegalArgumentException(what + ": '" + text + "' is not one of " + valid);
    }
}
