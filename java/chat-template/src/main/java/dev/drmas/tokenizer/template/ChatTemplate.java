// ChatTemplate.java — a tokenizer's chat_template, rendered exactly as HF transformers'
// apply_chat_template(messages, add_generation_prompt=..., tokenize=False) renders it: the
// variables messages, add_generation_prompt, tools and documents (None unless given), plus the
// caller's extra context (bos_token, eos_token, enable_thinking, ...). The entry point of the
// drmas-chat-template module (java/chat-template, no dependencies; README.md there).
//
// Which Jinja: the subset HF chat templates use, with jinja2 3.1's semantics in HF's environment
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, keep_trailing_newline=False,
// loopcontrols, the {% generation %} tag, HF's tojson, raise_exception and strftime_now):
//   statements  if/elif/else, for (else, `if` filter, unpacking, the loop object with cycle and
//               changed), set (also {% set %}...{% endset %} and namespace attributes), macro
//               (defaults, varargs, kwargs, caller), call, filter and with blocks, break/continue,
//               raw, comments, -/+ whitespace control;
//   expressions Python's literals, operators, comparisons, truthiness, str()/repr() printing
//               (True, None, 2.0, {'a': 1}), slicing with steps, ~, conditional expressions,
//               str/dict/list methods (the mutating ones fail, as in the sandbox), % and .format();
//   builtins    43 filter names (jinja2's, tojson as HF's) and 24 tests (Builtins.java), the
//               globals range, namespace and dict.
// Not implemented (none of the templates tested here uses them): include/import/from/extends/
// block (a chat template is one string; there is no loader), autoescape, do, print, recursive
// loops, *args/**kwargs at call sites, the filters batch, slice, groupby, wordwrap, urlize, ...
// and the globals lipsum, cycler, joiner. An unknown tag or filter is a TemplateException at
// parse time naming line:col, as in jinja2; a missing global is undefined like any unknown name.
//
// Why an engine of its own: the Java engines for Jinja-like syntax, Jinjava and Pebble, do not
// render these templates as jinja2 does. Of this module's 434 jinja2 goldens (compare/, results
// in README.md), Jinjava 2.8.4 with trim/lstrip blocks renders 132 byte for byte and none of the
// 15 Qwen3 cases: it reads Qwen3's `namespace(..., last_query_index=messages|length - 1)` as
// `(last_query_index=...) - 1` and has no `[::-1]`; it prints True as true and dicts as {a=1},
// its tojson has no spaces, -7 // 2 is 3, and lstrip_blocks strips spaces after text on the
// same line. Pebble 4.0.0 renders 84 and no Qwen3 case (it cannot parse `[::-1]`); it has no
// lstrip_blocks, keeps the trailing newline, and its raw tag is called verbatim.
package dev.drmas.tokenizer.template;

import java.time.Clock;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public final class ChatTemplate {
    private final Template template;

    private ChatTemplate(Template template) {
        this.template = template;
    }

    /** Parses a chat template; a syntax error is a TemplateException naming line:col. */
    public static ChatTemplate parse(String source) {
        return new ChatTemplate(Template.parse(source));
    }

    /**
     * messages: List of Map with "role", "content" (and optional extra keys such as tool_calls,
     * reasoning_content). extraContext may be null; it must not set messages or
     * add_generation_prompt. Like HF, tools and documents are defined (as None) even when not given,
     * which templates testing `tools is defined` rely on.
     */
    public String render(List<Map<String, Object>> messages, boolean addGenerationPrompt, Map<String, Object> extraContext) {
        return render(messages, addGenerationPrompt, extraContext, Clock.systemDefaultZone());
    }

    /** As render, with strftime_now reading the given clock (tests pin the date). */
    String render(List<Map<String, Object>> messages, boolean addGenerationPrompt, Map<String, Object> extraContext,
            Clock clock) {
        Map<String, Object> ctx = new HashMap<>();
        ctx.put("tools", null);
        ctx.put("documents", null);
        if (extraContext != null) {
            for (String reserved : List.of("messages", "add_generation_prompt")) {
                if (extraContext.containsKey(reserved)) {
                    throw new IllegalArgumentException("extraContext must not set '" + reserved + "'; it is a parameter of render");
                }
            }
            ctx.putAll(extraContext);
        }
        ctx.put("messages", messages);
        ctx.put("add_generation_prompt", addGenerationPrompt);
        return template.render(ctx, clock);
    }
}
