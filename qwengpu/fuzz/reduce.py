"""A statement-deleting reducer: the smallest body (greedily) on which a disagreement persists."""
from __future__ import annotations

import copy
from typing import Callable

from .generator import Stmt


def _variants(body: list):
    """Every body with one statement removed, or one if/for replaced by a branch or its body,
    largest cuts first."""
    for i, s in enumerate(body):
        yield body[:i] + body[i + 1:]
    for i, s in enumerate(body):
        if s.kind == "if":
            yield body[:i] + s.body + body[i + 1:]
            if s.orelse:
                yield body[:i] + s.orelse + body[i + 1:]
                yield body[:i] + [Stmt("if", s.text, s.body)] + body[i + 1:]
        if s.kind in ("if", "for"):
            for inner in _variants(s.body):
                yield body[:i] + [Stmt(s.kind, s.text, inner, s.orelse)] + body[i + 1:]
        if s.kind == "if" and s.orelse:
            for inner in _variants(s.orelse):
                yield body[:i] + [Stmt("if", s.text, s.body, inner)] + body[i + 1:]


def size(body: list) -> int:
    return sum(1 + size(s.body) + size(s.orelse) for s in body)


def reduce_body(body: list, still_fails: Callable[[list], bool], max_tries: int = 400) -> list:
    """Delete statements while `still_fails(candidate)` holds (at most `max_tries` checks)."""
    best, tries = copy.deepcopy(body), 0
    changed = True
    while changed and tries < max_tries:
        changed = False
        for cand in _variants(best):
            tries += 1
            if still_fails(cand):
                best, changed = cand, True
                break
            if tries >= max_tries:
                break
    return best
