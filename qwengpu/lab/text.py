"""Text in a launch's context: the tokens of a spliced checkpoint's own vocabulary (its base's), run
before a launch (`record_launch(..., prefix=...)`) or after it (`MachineView.continue_text`)."""
from __future__ import annotations


def prefix_tokens(machine, prefix) -> tuple[list, list]:
    """(ids, texts) of a text prefix: a string (tokenized by the checkpoint's tokenizer) or token
    ids of the checkpoint's own vocabulary; only a spliced checkpoint has text tokens."""
    if prefix is None or (not isinstance(prefix, str) and len(prefix) == 0):
        return [], []
    offset = getattr(machine, "token_offset", None)
    if not offset:
        raise ValueError("a text prefix needs a model with text tokens: a spliced checkpoint "
                         "(`qwengpu build --base BASE --out DIR --machine tiny`, then model=DIR)")
    tok = machine.tokenizer
    ids = tok(prefix, add_special_tokens=False).input_ids if isinstance(prefix, str) else [int(i) for i in prefix]
    if isinstance(prefix, str) and prefix.strip() and not ids:
        raise ValueError(f"the checkpoint's tokenizer ({type(tok).__name__}) gives no tokens for {prefix[:40]!r}: "
                         "pass token ids of its vocabulary instead")
    bad = [i for i in ids if not 0 <= i < offset]
    if bad:
        raise ValueError(f"prefix token ids {bad[:5]} are not text tokens of this checkpoint (0..{offset - 1})")
    return ids, [tok.decode([i]) for i in ids]
