// Tokenizer.java — what the trainer and the rollout engine need from a tokenizer: text to ids and
// back with Hugging Face semantics, the vocabulary, the special tokens that stop generation and pad
// batches, and the chat template with the context it is rendered in. HfTokenizer serves both real
// HF tokenizers and the built-in one (BuiltinTokenizer writes a tokenizer.json), so there is one
// implementation; the interface keeps callers independent of DJL.
package dev.drmas.tokenizer;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;

public interface Tokenizer extends AutoCloseable {

    /**
     * The ids of {@code text} taken literally: HF {@code encode(text, add_special_tokens=False)}. Special
     * tokens written in the text (e.g. {@code <|im_start|>}) still become their single ids, but the
     * post-processor adds nothing (no BOS/EOS). This is how HF tokenizes a rendered chat template, which
     * already contains every special token the model needs.
     */
    default int[] encode(String text) {
        return encode(text, false);
    }

    /** HF {@code encode(text, add_special_tokens=addSpecialTokens)}: with true, the post-processor may add BOS/EOS. */
    int[] encode(String text, boolean addSpecialTokens);

    /**
     * {@link #encode(String)} of each text, in order (HF's batch encoding, {@code tokenizer(texts)}):
     * the same ids, where an implementation may encode the texts on several threads.
     */
    default List<int[]> encodeAll(List<String> texts) {
        List<int[]> out = new java.util.ArrayList<>(texts.size());
        for (String t : texts) out.add(encode(t));
        return out;
    }

    /**
     * HF {@code decode(ids, skip_special_tokens=skipSpecialTokens)}. Only tokens marked special are
     * skipped (in Qwen3, {@code <|im_end|>} is special but {@code <think>} is not).
     *
     * @throws IllegalArgumentException if an id is not a token of this vocabulary (HF would drop it silently)
     */
    String decode(int[] ids, boolean skipSpecialTokens);

    /** Number of ids, added tokens included (HF {@code len(tokenizer)}); every token id is below it. */
    int vocabSize();

    /** The id of a vocabulary entry or added token, written as the vocabulary writes it (e.g. "Ġworld"). */
    OptionalInt tokenId(String token);

    /** The vocabulary entry of {@code id} (HF {@code convert_ids_to_tokens}). */
    String idToToken(int id);

    /** The end-of-sequence token (tokenizer_config.json {@code eos_token}). */
    String eosToken();

    int eosTokenId();

    /** Absent for tokenizers without one (Qwen3, Llama 3). */
    Optional<String> bosToken();

    OptionalInt bosTokenId();

    /** Absent for tokenizers without one (e.g. Llama 3 base). */
    OptionalInt padTokenId();

    /**
     * The ids that end a generated turn, without duplicates, in this order: the eos token, the ids of
     * generation_config.json {@code eos_token_id}, and the chat end markers {@code <|im_end|>},
     * {@code <|endoftext|>}, {@code <|eot_id|>}, {@code <|end_of_text|>} where they are special tokens here.
     */
    List<Integer> stopTokenIds();

    /**
     * The raw Jinja chat template, when the tokenizer carries one (see HfTokenizer for where it is read).
     *
     * @throws TokenizerFileException when the tokenizer declares templates but none that transformers would use
     */
    Optional<String> chatTemplate();

    /** The file chatTemplate() was read from (chat_template.jinja or tokenizer_config.json), for error messages. */
    Optional<Path> chatTemplateFile();

    /**
     * The special tokens a chat template may refer to, as HF passes them: {@code bos_token},
     * {@code eos_token}, {@code pad_token}, {@code unk_token} (strings, only those that are set) and
     * {@code additional_special_tokens} (a list of strings, when set).
     */
    Map<String, Object> templateContext();

    /** Frees the native tokenizer. */
    @Override
    void close();
}
