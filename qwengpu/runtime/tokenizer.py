"""The machine's tokenizer: one word per machine token (`<go>`, `<exec 3 1011>`, `<carry 0 1 all 7f>` ...).

Saved next to the checkpoint, so `AutoTokenizer.from_pretrained(path)` reads the prompt and the
generated tokens as text:

    tok = AutoTokenizer.from_pretrained(path)
    tok.decode(out[0, n:])           # '<exec 0 1111> <carry 0 0 0 01> ... <halt>'
    tok("<go>")["input_ids"]         # the machine's token ids

Every token is a bracketed word, so the pre-tokenizer isolates `<...>` pieces; whitespace between
tokens is dropped by the normaliser (decoding joins tokens with one space, encoding accepts it).
"""
from __future__ import annotations

import re
from pathlib import Path


def machine_tokenizer(tokens: list[str]):
    """A `PreTrainedTokenizerFast` whose vocabulary is `tokens` (id i = tokens[i])."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    bad = [t for t in tokens if not (t.startswith("<") and t.endswith(">") and ">" not in t[:-1])]
    if bad:
        raise ValueError(f"machine tokens must be single <...> words; {bad[:3]} are not")
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError("machine tokens must be distinct")
    # WordLevel needs an unknown token; an unknown piece is an error for the machine anyway, so
    # the first token (<go>) stands in and `encode` callers check with `machine_ids`
    tk = Tokenizer(WordLevel(vocab, unk_token=tokens[0]))
    tk.normalizer = normalizers.Sequence([normalizers.Strip(), normalizers.Replace(Regex(r">\s+<"), "><")])
    tk.pre_tokenizer = pre_tokenizers.Split(Regex(r"<[^>]*>"), behavior="isolated")
    tk.decoder = decoders.WordPiece(prefix="\0", cleanup=False)   # joins words with one space
    return PreTrainedTokenizerFast(tokenizer_object=tk, model_max_length=1 << 30)


def save_tokenizer(path, tokens: list[str]) -> None:
    machine_tokenizer(tokens).save_pretrained(Path(path))


def machine_ids(tokenizer, text: str) -> list[int]:
    """`text` (machine tokens, optionally space-separated) as ids; anything else is an error (the
    tokenizer itself would map it to its stand-in unknown token)."""
    vocab = tokenizer.get_vocab()
    ids = []
    for m in re.finditer(r"<[^>]*>|[^<\s]+", text):
        if m.group() not in vocab:
            raise ValueError(f"{m.group()!r} (at character {m.start()}) is not a machine token")
        ids.append(vocab[m.group()])
    return ids
