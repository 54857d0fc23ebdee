"""A small llama-architecture GGUF with random weights and a byte-level BPE vocabulary of its own,
for the GPU acceptance run (benchmarks/gpu_acceptance.sh), where no model can be fetched.

    python benchmarks/gpu_tiny_model.py OUT.gguf [--layers 8] [--embd 512] ...

Speed and memory behave like a real model of this shape (the same tensors, the same KV cache);
the text it writes is noise, which is all the study needs: fidelity compares configs of the same
model. The vocabulary: the 256 byte tokens of GPT-2's byte-level BPE, 500 three-letter made-up
words ("bak", "tum", ...) that are one token both at the start of a text and after a space (so
kvtune's synthetic prompts are sized exactly, and llama-server's /tokenize agrees), and the
ChatML special tokens with a ChatML chat template. Each word is consonant-vowel-consonant with
the first consonant from one set and the last from another, so no merge of one word fires
inside another. Writes in a second or two; needs only numpy and gguf (the `gguf` package).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

FIRST = "bdfgklmnpr"  # 10 consonants that start a word
VOWELS = "aeiou"
LAST = "stvwxzchjq"  # 10 others that end it: no vowel-consonant pair starts a word
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def byte_tokens() -> list[str]:
    """GPT-2's bytes_to_unicode: the printable stand-in of every byte, in byte order."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def vocabulary() -> tuple[list[str], list[str], list[int]]:
    """(tokens, merges, token types): bytes, word stems, words, " words", specials."""
    tokens = byte_tokens()
    space = tokens[ord(" ")]  # "Ġ"
    stems = [c + v for c in FIRST for v in VOWELS]
    words = [s + c for s in stems for c in LAST]
    merges = [f"{s[0]} {s[1]}" for s in stems] + [f"{w[:2]} {w[2]}" for w in words] + [f"{space} {w}" for w in words]
    tokens = tokens + stems + words + [space + w for w in words]
    types = [1] * len(tokens) + [3] * len(SPECIALS)  # 1 normal, 3 control
    return tokens + SPECIALS, merges, types


def write(path: Path, layers: int, embd: int, heads: int, kv_heads: int, ff: int, ctx: int, seed: int) -> None:
    import gguf

    tokens, merges, types = vocabulary()
    vocab = len(tokens)
    head_dim = embd // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("kvtune-tiny-llama")
    w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)

    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(embd, dtype=np.float32)
    w.add_tensor("token_embd.weight", mat(vocab, embd))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.attn_q.weight", mat(embd, embd))
        w.add_tensor(f"blk.{i}.attn_k.weight", mat(kv_heads * head_dim, embd))
        w.add_tensor(f"blk.{i}.attn_v.weight", mat(kv_heads * head_dim, embd))
        w.add_tensor(f"blk.{i}.attn_output.weight", mat(embd, embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", mat(ff, embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", mat(ff, embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", mat(embd, ff))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", mat(vocab, embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--embd", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=1408)
    p.add_argument("--ctx", type=int, default=8192)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    start = time.monotonic()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write(a.out, a.layers, a.embd, a.heads, a.kv_heads, a.ff, a.ctx, a.seed)
    size = a.out.stat().st_size / 2**20
    print(f"wrote {a.out}: llama, {a.layers} layers, {a.embd} wide, {size:.1f} MiB in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
