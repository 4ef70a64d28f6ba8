// Values.java — the runtime types the interpreter adds to plain Java values (Map, List, String,
// Long/Integer/Double, Boolean, null): jinja2's Undefined, Python tuples, namespace(), one-shot
// generators (what jinja2's map/select/reverse return), callables and their argument binding.
package dev.drmas.tokenizer.template;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Values {
    private Values() {}

    /** A Python-level error (TypeError, UndefinedError, ...); the evaluator adds line:col. */
    static class PyError extends RuntimeException {
        PyError(String message) {
            super(message, null, false, false);
        }
    }

    /** raise_exception(msg) from the template: surfaces with the template's own message. */
    static final class RaisedByTemplate extends PyError {
        RaisedByTemplate(String message) {
            super(message);
        }
    }

    /**
     * jinja2's default Undefined: renders as "", is falsy, has length 0 and iterates as empty;
     * any other use (attribute, item, call, arithmetic) fails with the hint saying what was missing.
     */
    static final class Undefined {
        final String hint;

        Undefined(String hint) {
            this.hint = hint;
        }

        static Undefined name(String name) {
            return new Undefined("'" + name + "' is undefined");
        }

        /** jinja2's message for a missing attribute or item of obj. */
        static Undefined member(Object obj, Object key) {
            String owner = obj == null ? "None" : Py.typeName(obj) + " object";
            return key instanceof String
                    ? new Undefined("'" + owner + "' has no attribute " + Py.repr(key))
                    : new Undefined(owner + " has no element " + Py.repr(key));
        }

        PyError fail() {
            return new PyError(hint);
        }
    }

    /** A Python tuple: immutable, prints as (a, b), equal only to tuples. */
    record Tuple(List<Object> items) {
        Tuple {
            items = java.util.Collections.unmodifiableList(items);
        }
    }

    /** dict.items()/keys()/values(): iterable and sized like a list, but no indexing, and prints as dict_items([...]). */
    record DictView(String kind, List<Object> items) {}

    /** jinja2's namespace(): the one object templates may assign attributes on. */
    static final class Namespace {
        final Map<String, Object> attrs = new LinkedHashMap<>();
    }

    /** A Python iterator: truthy even when empty, consumed by one pass, has no len(). */
    static final class Generator {
        final Iterator<Object> it;
        final String typeName;

        Generator(Iterator<Object> it, String typeName) {
            this.it = it;
            this.typeName = typeName;
        }
    }

    /** Anything a template can call: macros, globals, bound methods, loop.cycle. */
    interface Callable {
        Object call(Args args);
    }

    static final Object MISSING = new Object() {
        @Override
        public String toString() {
            return "<missing>";
        }
    };

    /** Evaluated call arguments, bound to parameter names the way Python does. */
    record Args(List<Object> positional, Map<String, Object> keyword) {
        static final Args NONE = new Args(List.of(), Map.of());

        static Args of(Object... positional) {
            return new Args(List.of(positional), Map.of());
        }

        /**
         * Binds to params (the first `required` of them mandatory): returns one slot per param,
         * MISSING where not given; too many, unknown or duplicate arguments are errors naming fn.
         */
        Object[] bind(String fn, int required, String... params) {
            if (positional.size() > params.length) {
                throw new PyError(fn + "() takes at most " + params.length + " argument(s) (" + positional.size()
                        + " given)");
            }
            Object[] out = new Object[params.length];
            java.util.Arrays.fill(out, MISSING);
            for (int i = 0; i < positional.size(); i++) out[i] = positional.get(i);
            for (Map.Entry<String, Object> e : keyword.entrySet()) {
                int idx = List.of(params).indexOf(e.getKey());
                if (idx < 0) throw new PyError(fn + "() got an unexpected keyword argument '" + e.getKey() + "'");
                if (out[idx] != MISSING) throw new PyError(fn + "() got multiple values for argument '" + e.getKey() + "'");
                out[idx] = e.getValue();
            }
            for (int i = 0; i < required; i++) {
                if (out[i] == MISSING) throw new PyError(fn + "() missing required argument '" + params[i] + "'");
            }
            return out;
        }
    }

    static Object or(Object v, Object dflt) {
        return v == MISSING ? dflt : v;
    }
}
