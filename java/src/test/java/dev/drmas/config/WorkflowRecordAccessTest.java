// WorkflowRecordAccessTest.java — a workflow's options (or synthetic data) record that the binder
// cannot read by reflection (the record or its defaults() not public, no static defaults()) is an
// error naming the workflow, the record and what is wrong, instead of reflection's own message
// ("cannot access a member of class ... with modifiers public static") or a null later on.
package dev.drmas.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

public class WorkflowRecordAccessTest {
    record Hidden(int steps) {
        public static Hidden defaults() {
            return new Hidden(1);
        }
    }

    public record HiddenDefaults(int steps) {
        static HiddenDefaults defaults() {
            return new HiddenDefaults(1);
        }
    }

    static final class Closed {
        public record Inner(int steps) {
            public static Inner defaults() {
                return new Inner(1);
            }
        }
    }

    public record NoDefaults(int steps) {
    }

    public record Fine(int steps) {
        public static Fine defaults() {
            return new Fine(1);
        }
    }

    /** A workflow whose options record is {@code type}. */
    static WorkflowSchema workflow(Class<? extends Record> type) {
        return new WorkflowSchema() {
            @Override public String name() { return "planner-coder"; }
            @Override public Class<? extends Record> optionsType() { return type; }
            @Override public List<String> defaultRoles() { return List.of("planner"); }
        };
    }

    static String problem(Class<? extends Record> type) {
        return Binder.unbindable(workflow(type), "options record", type);
    }

    @Test
    void aRecordTheBinderCannotReadNamesTheWorkflowAndWhy() {
        String pre = "workflow 'planner-coder': options record ";
        String post = " must be public with a public static defaults() (";
        assertEquals(pre + Hidden.class.getName() + post + "it is not public)", problem(Hidden.class));
        assertEquals(pre + HiddenDefaults.class.getName() + post + "its defaults() is not public)", problem(HiddenDefaults.class));
        assertEquals(pre + NoDefaults.class.getName() + post + "it has no defaults())", problem(NoDefaults.class));
        assertNull(problem(Fine.class));
        // a public record inside a class that is not public is no more readable
        assertEquals(pre + Closed.Inner.class.getName() + post + "its enclosing " + Closed.class.getName() + " is not public)",
                problem(Closed.Inner.class));
    }

    @Test
    void defaultsOfSaysWhatIsWrong() {
        var e = assertThrows(IllegalStateException.class, () -> Binder.defaultsOf(HiddenDefaults.class));
        assertEquals("config record " + HiddenDefaults.class.getName() + " must be public with a public static defaults() "
                + "(its defaults() is not public)", e.getMessage());
    }
}
