// Check.java — the range checks of the config records, each throwing a ConfigException that
// names the key (relative to the record) and the value, so that every record reports bad values
// the same way and the binder can prefix the full path. Public: workflows' own option records
// (orchestra.options, data.synthetic) check their values with it too.
package dev.drmas.config;

import dev.drmas.algo.SettingException;
import java.util.regex.Pattern;

public final class Check {
    private Check() {
    }

    /** Ids that become parts of key paths and folder names: no dots, brackets or slashes. */
    private static final Pattern ID = Pattern.compile("[A-Za-z0-9_][A-Za-z0-9_-]*");

    public static void that(boolean ok, String key, String problem) {
        if (!ok) throw ConfigException.at(key, problem);
    }

    public static <T> T given(T value, String key) {
        if (value == null) throw ConfigException.at(key, "is required");
        return value;
    }

    public static void positive(int value, String key) {
        that(value > 0, key, "must be > 0, got " + value);
    }

    public static void nonNegative(int value, String key) {
        that(value >= 0, key, "must be >= 0, got " + value);
    }

    public static void positive(double value, String key) {
        that(value > 0 && Double.isFinite(value), key, "must be a finite number > 0, got " + num(value));
    }

    public static void nonNegative(double value, String key) {
        that(value >= 0 && Double.isFinite(value), key, "must be a finite number >= 0, got " + num(value));
    }

    /** A positive number that float32 holds (what LibTorch turns optimiser settings into). */
    public static void positiveFloat32(double value, String key) {
        positive(value, key);
        that(value <= Float.MAX_VALUE, key, "must be <= " + Float.MAX_VALUE + " (LibTorch takes it as a float32), got " + num(value));
    }

    /** value in [lo, hi) when {@code hiOpen}, else [lo, hi]. */
    public static void inRange(double value, double lo, double hi, boolean hiOpen, String key) {
        boolean ok = value >= lo && (hiOpen ? value < hi : value <= hi);
        that(ok, key, "must be in [" + num(lo) + ", " + num(hi) + (hiOpen ? ")" : "]") + ", got " + num(value));
    }

    public static void notBlank(String value, String key) {
        given(value, key);
        that(!value.isBlank(), key, "must not be empty");
    }

    public static void id(String value, String key) {
        given(value, key);
        that(ID.matcher(value).matches(), key,
                "'" + value + "' is not a valid id (letters, digits, _ and -, not starting with -)");
    }

    /** A number in a message: 1 rather than 1.0, else Java's shortest exact form (1.0E-6). */
    public static String num(double v) {
        return SettingException.num(v);
    }
}
