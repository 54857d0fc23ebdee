"""Token counts for prompts: exact when the model's tokenizer is at hand, a stated guess otherwise.

Two sources give exact synthetic prompts:

- a Hugging Face tokenizer (a folder or ``tokenizer.json``), through the `tokenizers` package,
  else `transformers`; it counts any text exactly;
- a GGUF file's own vocabulary (``tokenizer.ggml.tokens`` / ``merges`` / ``scores``) through
  the `gguf` package. kvtune does not reimplement every pre-tokenizer, so arbitrary text is
  counted approximately (GPT-2-style split, then the file's BPE merges), but single words are
  run through the real merge rules: a word that comes out as one token both at the start of a
  text and after a space is a *single-token word*, and a prompt made only of such words joined
  by single spaces has exactly as many tokens as words.

Synthetic prompts built from `single_token_words()` are therefore exact for either source
(the e2e test checks this against llama-server's ``/tokenize``). Counts are of the prompt text
only: a chat template and a BOS token add their own tokens, which ``usage.prompt_tokens`` shows.
Without either source, `try_load_tokenizer` returns None and a note saying prompts are sized
approximately.
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Callable

from kvtune.errors import SpecError
from kvtune.gguf_file import is_gguf

MAX_WORDS = 2000
_CANDIDATE = re.compile(r"^[a-z]{3,12}$")
_GPT2_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")


class TokenizerUnavailable(Exception):
    """No exact tokenizer here (library not installed, vocabulary type not supported)."""


class Tokenizer:
    """What the bench needs from a tokenizer: counts and single-token words."""

    name: str = "tokenizer"
    # True when count() is exact for any text (HF); False when it is an estimate (GGUF).
    exact_count: bool = False

    def count(self, text: str) -> int:
        raise NotImplementedError

    def single_token_words(self) -> list[str]:
        """Lowercase words that are one token at the start of a text and after a space."""
        raise NotImplementedError


class HFTokenizer(Tokenizer):
    """A Hugging Face tokenizer: exact counts of any text (special tokens not added)."""

    exact_count = True

    def __init__(self, encode: Callable[[str], list[int]], vocab: dict[str, int], name: str):
        self._encode = encode
        self._vocab = vocab
        self.name = name
        self._words: list[str] | None = None

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def single_token_words(self) -> list[str]:
        if self._words is None:
            cands: dict[str, int] = {}
            for tok, tid in self._vocab.items():
                for prefix in ("Ġ", "▁"):
                    if tok.startswith(prefix) and _CANDIDATE.match(tok[len(prefix) :]):
                        w = tok[len(prefix) :]
                        cands[w] = min(tid, cands.get(w, tid))
            words = []
            for w in sorted(cands, key=lambda w: (cands[w], w)):
                if self.count(w) == 1 and self.count(f"{w} {w} {w}") == 3:
                    words.append(w)
                    if len(words) >= MAX_WORDS:
                        break
            self._words = words
        return self._words


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map used by byte-level BPE vocabularies."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


_B2U = _bytes_to_unicode()


class GGUFVocab(Tokenizer):
    """A GGUF file's vocabulary: BPE ("gpt2") or SentencePiece-BPE ("llama") merges per word."""

    exact_count = False

    def __init__(self, model: str, tokens: list[str], merges: list[str], scores: list[float], name: str):
        if model not in ("gpt2", "llama"):
            raise TokenizerUnavailable(f"GGUF tokenizer model {model!r} is not supported")
        self.model = model
        self.name = name
        self._ids = {t: i for i, t in enumerate(tokens)}
        self._tokens = tokens
        self._ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges) if " " in m}
        self._scores = scores
        self._words: list[str] | None = None
        self._cache: dict[str, int] = {}

    # -- one pre-tokenized piece -> number of tokens ---------------------------------------
    def _bpe_len(self, symbols: list[str]) -> int:
        """Standard rank-ordered BPE merges (GPT-2), returning the token count."""
        parts = list(symbols)
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                r = self._ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            a, b = parts[best[1]], parts[best[1] + 1]
            merged: list[str] = []
            i = 0
            while i < len(parts):
                if i < len(parts) - 1 and parts[i] == a and parts[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return len(parts)

    def _spm_len(self, piece: str) -> int:
        """SentencePiece BPE: merge the adjacent pair whose union is the best-scored token."""
        parts = list(piece)
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                tid = self._ids.get(parts[i] + parts[i + 1])
                if tid is not None:
                    score = self._scores[tid] if tid < len(self._scores) else 0.0
                    if best is None or score > best[0]:
                        best = (score, i)
            if best is None:
                break
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        # Characters missing from the vocabulary fall back to one token per UTF-8 byte.
        return sum(1 if p in self._ids else len(p.encode()) for p in parts)

    def _piece_len(self, piece: str) -> int:
        n = self._cache.get(piece)
        if n is None:
            if self.model == "gpt2":
                n = self._bpe_len([_B2U[b] for b in piece.encode()])
            else:
                n = self._spm_len(piece.replace(" ", "▁"))
            if len(self._cache) < 200_000:
                self._cache[piece] = n
        return n

    def count(self, text: str) -> int:
        """Approximate for arbitrary text (see the module docstring); exact for prompts of
        single-token words."""
        if self.model == "gpt2":
            return sum(self._piece_len(p) for p in _GPT2_SPLIT.findall(text))
        return sum(self._piece_len(" " + w) for w in text.split())

    def single_token_words(self) -> list[str]:
        if self._words is None:
            prefix = "Ġ" if self.model == "gpt2" else "▁"
            words = []
            for tok in self._tokens:  # vocabulary order: common merges first
                w = tok[1:] if tok.startswith(prefix) else ""
                if not _CANDIDATE.match(w):
                    continue
                if self.model == "gpt2":
                    ok = self._piece_len(" " + w) == 1 and self._piece_len(w) == 1
                else:  # SentencePiece adds the leading space to the first word itself
                    ok = self._piece_len(" " + w) == 1
                if ok:
                    words.append(w)
                    if len(words) >= MAX_WORDS:
                        break
            self._words = words
        return self._words


def _field_str(field, i: int) -> str:
    return bytes(field.parts[i]).decode("utf-8", "replace")


def _load_gguf(path: Path) -> GGUFVocab:
    from kvtune.gguf_file import read_gguf  # parsed once, shared with the planner

    try:
        r = read_gguf(path)
    except (OSError, ValueError) as e:
        raise SpecError(f"cannot read GGUF file {str(path)!r}: {e}") from e
    f = r.fields.get("tokenizer.ggml.model")
    if f is None or "tokenizer.ggml.tokens" not in r.fields:
        raise SpecError(f"GGUF file {str(path)!r} holds no tokenizer vocabulary")
    model = _field_str(f, f.data[0])
    ft = r.fields["tokenizer.ggml.tokens"]
    tokens = [_field_str(ft, i) for i in ft.data]
    fm = r.fields.get("tokenizer.ggml.merges")
    merges = [_field_str(fm, i) for i in fm.data] if fm is not None else []
    fs = r.fields.get("tokenizer.ggml.scores")
    scores = [float(fs.parts[i][0]) for i in fs.data] if fs is not None else []
    return GGUFVocab(model, tokens, merges, scores, name=f"GGUF vocabulary of {path.name}")


# Files by which transformers' AutoTokenizer finds a tokenizer in a model folder.
HF_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


def _load_hf(path: Path) -> HFTokenizer:
    tok_json = path / "tokenizer.json" if path.is_dir() else path
    has_tokenizers = importlib.util.find_spec("tokenizers") is not None
    has_transformers = importlib.util.find_spec("transformers") is not None
    if has_tokenizers and tok_json.is_file():
        from tokenizers import Tokenizer as _Tk

        try:
            tk = _Tk.from_file(str(tok_json))
        except Exception as e:  # the library's own parse errors
            raise SpecError(f"cannot load tokenizer {str(tok_json)!r}: {e}") from e
        return HFTokenizer(
            lambda t: tk.encode(t, add_special_tokens=False).ids, tk.get_vocab(), name=f"HF tokenizer {tok_json}"
        )
    # transformers only for a folder that has tokenizer files of its own: importing it (and the
    # torch it may bring) takes seconds to minutes, for nothing on a folder without any
    if has_transformers and path.is_dir() and any((path / f).is_file() for f in HF_TOKENIZER_FILES):
        from transformers import AutoTokenizer

        try:
            auto = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except Exception as e:
            raise SpecError(f"cannot load tokenizer from {str(path)!r}: {e}") from e
        return HFTokenizer(
            lambda t: auto.encode(t, add_special_tokens=False), auto.get_vocab(), name=f"HF tokenizer {path}"
        )
    if not tok_json.is_file():
        raise SpecError(f"{str(path)!r} is neither a GGUF file nor a folder with tokenizer.json")
    raise TokenizerUnavailable("reading tokenizer.json needs the `tokenizers` (or `transformers`) package")


@lru_cache(maxsize=8)
def load_tokenizer(source: str) -> Tokenizer:
    """A tokenizer from a GGUF file, an HF folder or a tokenizer.json (cached per path).

    Raises SpecError when the path is missing or unreadable, TokenizerUnavailable when the
    library that reads it is not installed or the vocabulary type is not supported.
    """
    path = Path(source).expanduser()
    if not path.exists():
        raise SpecError(
            f"tokenizer source {source!r} does not exist: give a GGUF file, a Hugging "
            f"Face model folder or a tokenizer.json"
        )
    if path.is_file():
        try:
            gguf = is_gguf(path)
        except OSError as e:
            raise SpecError(f"cannot read {source!r}: {e.strerror}") from e
        if gguf:
            if importlib.util.find_spec("gguf") is None:
                raise TokenizerUnavailable("reading a GGUF vocabulary needs the `gguf` package")
            return _load_gguf(path)
    return _load_hf(path)


def try_load_tokenizer(source: str | Path | None) -> tuple[Tokenizer | None, str]:
    """(tokenizer, note) or (None, why prompts will be approximate). Missing paths still raise."""
    if source is None:
        return None, "no tokenizer given: prompt sizes are approximate (about one token per word)"
    try:
        tok = load_tokenizer(str(source))
    except TokenizerUnavailable as e:
        return None, f"{e}: prompt sizes are approximate (about one token per word)"
    if not tok.single_token_words():
        return tok, f"{tok.name} has no single-token words: synthetic prompt sizes are approximate"
    return tok, f"prompt sizes exact for {tok.name}"
