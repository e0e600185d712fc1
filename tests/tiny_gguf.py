"""A tiny random-weight llama GGUF, built at test time with the `gguf` package.

About 0.5 MB: two transformer blocks of width 32 over a ~2,000-piece SentencePiece-style vocabulary
with byte fallback (so any UTF-8 text tokenizes and any grammar character can be produced) and a
ChatML chat template (so `create_chat_completion` formats messages the way real small models do).
llama.cpp loads it in tens of milliseconds. Its answers are gibberish: tests built on it assert on
mechanics (streaming, cancelling, parsing, validating, grounding), never on content.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Word pieces beyond single characters, so the tokenizer merges words the way a real vocabulary does
# and token counts of our prompts are realistic (a character-level count would be ~4x too high); the
# space marker "▁" is SentencePiece's.
_WORD_PIECES = tuple(
    """
    the step steps loss grad norm lr warmup clip at to of and is run val train spike NaN high low cause fix
    rate learning you are a senior deep engineer diagnose this training from features below cite only
    numbers given there reply in short markdown pathology gradient explosion vanishing overfitting missing
    overflow data problem or none what happened critical which signal moved first fixes concrete changes
    threshold weight decay augmentation loader workers summary one sentence causes each confidence evidence
    metrics best final rule based findings around hyperparameters non finite every flat metric higher lower
    better divergence exploding gradients warning info hint became baseline peak ratio before above seen
    oscillation plateau input bottleneck convergence slow growth anomaly into look batch size optimizer
    model dropout seed notes config JSON Run Rule Metrics Around Hyperparameters Diagnose Cite Reply
    You Markdown Pathology Cause Fixes
    """.split()
)

# Token types from gguf.TokenType, spelled out so the vocabulary reads as data.
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


def tiny_vocab() -> tuple[list[str], list[float], list[int]]:
    """(pieces, scores, types): specials, 256 byte-fallback pieces, ChatML markers, characters, words."""
    pieces = ["<unk>", "<s>", "</s>"]
    types = [_UNKNOWN, _CONTROL, _CONTROL]
    pieces += [f"<0x{b:02X}>" for b in range(256)]
    types += [_BYTE] * 256
    pieces += ["<|im_start|>", "<|im_end|>"]
    types += [_CONTROL, _CONTROL]
    chars = ["▁"] + [chr(c) for c in range(33, 127)]
    # SentencePiece builds a word by merging adjacent pieces, so every prefix of "▁word" must be a piece
    # too. Unique: llama.cpp aborts on a vocabulary with duplicate pieces.
    # Words right after punctuation ("deep-learning", "**Cause**") carry no space marker.
    prefixes = [f"▁{w}"[:n] for w in _WORD_PIECES for n in range(2, len(w) + 2)]
    prefixes += [w[:n] for w in _WORD_PIECES for n in range(2, len(w) + 1)]
    words = list(dict.fromkeys(prefixes))
    pieces += chars + words
    types += [_NORMAL] * (len(chars) + len(words))
    # SentencePiece merges the highest-scoring pieces first: longer pieces score higher.
    scores = [0.0] * (len(pieces) - len(chars) - len(words))
    scores += [-10.0] * len(chars)
    scores += [-10.0 + len(w) for w in words]
    assert len(set(pieces)) == len(pieces)
    return pieces, scores, types


def build_tiny_gguf(
    path: Path,
    *,
    seed: int = 0,
    n_embd: int = 32,
    n_layer: int = 2,
    n_head: int = 4,
    n_ff: int = 64,
    n_ctx_train: int = 2048,
    chat_template: bool = True,
    finetune: str | None = None,
) -> Path:
    """Write a random-weight llama GGUF to `path` and return it.

    `chat_template=False` leaves the template out, as many converted base models do; `finetune` sets
    `general.finetune` (converters copy the repository's suffix there: "Instruct", "base").
    """
    import gguf

    pieces, scores, types = tiny_vocab()
    n_vocab = len(pieces)
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        # numpy shape is ggml's ne reversed: (out_features, in_features)
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-random-llama")
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(pieces.index("<|im_end|>"))
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    if chat_template:
        writer.add_chat_template(CHATML_TEMPLATE)
    if finetune:
        writer.add_finetune(finetune)

    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    # Byte-fallback pieces get zero output weights (logit 0, far below the top words at a low
    # temperature), so the random model rarely emits raw bytes: a stray byte that is not valid UTF-8
    # makes llama-cpp-python hold back all later streamed text (a real model does not do that).
    output = weight(n_vocab, n_embd)
    output[[t == _BYTE for t in types]] = 0.0
    writer.add_tensor("output.weight", output)
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)
