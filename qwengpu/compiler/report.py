"""The per-primitive margin and cost table: `python -m qwengpu.compiler.report [--json] [--tokens N]`.

Every primitive is compiled alone (its inputs straight from the embedding, so a failure is its
own), run through the stock `transformers` model on a random token sequence, and reported with

- its smallest *static* margin (`report["margins"]`, see `qwengpu.compiler.margins`: worst-case
  pre-activation distance over the SiLU/sigmoid saturation point 17, attention: guaranteed score
  gap over 32; safe bound 1),
- its smallest *measured* code margin in fp32 (`run.measure_margins`: 0.5 - the largest distance
  of a feature from its code; 0.5 is perfect, > 0 decodes exactly), for memories also the state's
  rails, for attention also the measured score gap / 32,
- its cost: layers it spans, residual features it writes, MLP neurons, GDN key heads / attention
  query heads,
- the same run with the checkpoint loaded by `from_pretrained(dtype=torch.bfloat16)`: exact or not,
  and its smallest code margin there.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass

from . import attention as A
from . import gadgets as G
from . import memory as M
from .compiling import compile_program
from .placement import field_chunks, key_heads
from .program import Program


@dataclass
class Case:
    name: str                     # the table's row
    primitives: set               # node primitives that make up the row (static margin, cost)
    prog: Program
    tokens: list                  # the token sequence run
    about: str = ""
    measured: set | None = None   # primitives whose variables are measured (default: the same)


def _vocab(prog: Program, rng, n: int, **ranges) -> list[str]:
    out = []
    for i in range(n):
        vals = {k: rng.randrange(lo, hi) for k, (lo, hi) in ranges.items()}
        out.append(prog.token(f"t{i}", **vals).text)
    return out


def _seq(vocab: list[str], rng, n: int) -> list[str]:
    return [rng.choice(vocab) for _ in range(n)]


def cases(n_tokens: int = 200, seed: int = 0) -> list[Case]:
    """One small program per primitive, with its token sequence."""
    return (_alu_cases(n_tokens, seed) + _code_cases(n_tokens, seed) + _memory_cases(n_tokens, seed)
            + _attention_cases(n_tokens, seed) + _erase_cases(n_tokens, seed))


def _alu_cases(n_tokens: int, seed: int) -> list[Case]:
    """add, sub, compare, bitwise, mux on 32-bit operands."""
    out = []
    W = 32

    def alu(name, prims, about, build, vocab_n=96):
        rng = random.Random(f"{seed}:{name}")
        prog = Program(name)
        a = prog.input_bits("a", W)
        b = prog.input_bits("b", W)
        c = prog.input_bits("c", 1)
        vocab = _vocab(prog, rng, vocab_n, a=(0, 1 << W), b=(0, 1 << W), c=(0, 2))
        for i, (x, y) in enumerate([(0, 0), ((1 << W) - 1, 1), ((1 << W) - 1, (1 << W) - 1)]):
            vocab.append(prog.token(f"e{i}", a=x, b=y, c=i % 2).text)
        build(prog, a, b, c)
        out.append(Case(name, prims, prog, _seq(vocab, rng, n_tokens), about))

    alu("add", {"add"}, "32-bit a + b + carry in, carry out",
        lambda p, a, b, c: G.add(p, a, b, cin=c, carry_out=True))
    alu("sub", {"sub"}, "32-bit a - b, borrow out", lambda p, a, b, c: G.sub(p, a, b, carry_out=True))
    alu("compare", {"compare"}, "`[a >= b]` on 11 bits, one threshold",
        lambda p, a, b, c: G.compare(p, p.slice(a, 0, 11), p.slice(b, 0, 11)))
    alu("bitwise", {"bitwise"}, "and, or, xor, andn of 32 bits",
        lambda p, a, b, c: [G.bitwise(p, op, a, b) for op in ("and", "or", "xor", "andn")])
    alu("mux", {"mux"}, "2-way select of 32 bits",
        lambda p, a, b, c: G.mux(p, c, [a, b]))
    return out


def _code_cases(n_tokens: int, seed: int) -> list[Case]:
    """decode/encode, lut, multiply."""
    out = []
    rng = random.Random(f"{seed}:codes")
    prog = Program("codes")
    x = prog.input_bits("x", 4)
    k = prog.input_onehot("k", 16)
    vocab = _vocab(prog, rng, 64, x=(0, 16), k=(0, 16))
    G.decode(prog, x)
    G.encode(prog, k, 4)
    out.append(Case("decode/encode", {"decode", "encode"}, prog, _seq(vocab, rng, n_tokens),
                    "4 bits -> one-hot(16); one-hot(16) -> 4 bits"))

    rng = random.Random(f"{seed}:lut")
    prog = Program("lut")
    k = prog.input_onehot("k", 16)
    vocab = _vocab(prog, rng, 16, k=(0, 16))
    G.lut(prog, k, [rng.randrange(256) for _ in range(16)], 8)
    out.append(Case("lut", {"lut"}, prog, _seq(vocab, rng, n_tokens), "one-hot(16) -> 8-bit table"))

    rng = random.Random(f"{seed}:mul")
    prog = Program("mul")
    a = prog.input_bits("a", 8)
    b = prog.input_bits("b", 8)
    vocab = _vocab(prog, rng, 96, a=(0, 256), b=(0, 256))
    vocab.append(prog.token("max", a=255, b=255).text)
    G.multiply(prog, a, b)
    out.append(Case("multiply/product", {"multiply"}, prog, _seq(vocab, rng, n_tokens),
                    "8 x 8 bits -> a number < 2^16"))
    return out


def _memory_cases(n_tokens: int, seed: int) -> list[Case]:
    """GDN memories (write then read, read-after-write) and the previous-token convolution."""
    out = []

    def ram(name, same, about):
        rng = random.Random(f"{seed}:{name}")
        prog = Program(name)
        wa = prog.input_onehot("wa", 16)
        ra = prog.input_onehot("ra", 16)
        val = prog.input_bits("val", 32)
        be = prog.input_bits("be", 4)
        vocab = _vocab(prog, rng, 96, wa=(0, 16), ra=(0, 16), val=(0, 1 << 32), be=(0, 16))
        m = M.GDNMemory(prog, "ram", slots=16, width=32, field_bits=8)
        m.write(wa, val, field_enable=[be.f(i) for i in range(4)])
        m.read(wa if same else ra)
        out.append(Case(name, {"memory"}, prog, _seq(vocab, rng, n_tokens), about))

    ram("GDN memory write/read", False, "16 x 32-bit words, byte enables")
    ram("read-after-write", True, "the same token reads the slot it writes")

    rng = random.Random(f"{seed}:prev")
    prog = Program("prev")
    val = prog.input_bits("val", 32)
    vocab = _vocab(prog, rng, 96, val=(0, 1 << 32))
    M.previous(prog, val, 1)
    M.previous(prog, val, 3)
    out.append(Case("previous-token conv", {"previous"}, prog, _seq(vocab, rng, n_tokens),
                    "32 bits from 1 and 3 tokens back"))
    return out


def _attention_cases(n_tokens: int, seed: int) -> list[Case]:
    """The attention gadgets: most recent, lookup, previous/offset, gather."""
    out = []

    def attn(name, prims, about, build):
        rng = random.Random(f"{seed}:{name}")
        prog = Program(name)
        w = prog.input_bits("w", 1)
        qc = prog.input_bits("qc", 1)
        val = prog.input_bits("val", 8)
        key = prog.input_bits("key", 4)
        qry = prog.input_bits("qry", 4)
        vocab = []
        for i in range(48):
            vocab.append(prog.token(f"t{i}", w=int(i < 12), qc=int(rng.random() < 0.85),
                                    val=rng.randrange(256), key=rng.randrange(16), qry=rng.randrange(16)).text)
        build(prog, w, qc, val, key, qry)
        seq = [rng.choice(vocab[:12]) if rng.random() < 0.05 else rng.choice(vocab[12:]) for _ in range(n_tokens)]
        out.append(Case(name, prims, prog, seq, about))

    attn("attention most-recent", {"most_recent"}, "last token whose kind bit is set",
         lambda p, w, qc, val, key, qry: A.most_recent(p, w, qc, val, name="recent"))
    attn("attention lookup", {"lookup"}, "last token whose 4-bit key == query",
         lambda p, w, qc, val, key, qry: A.lookup(p, key, qry, val, name="lookup"))
    attn("attention previous/offset", {"previous_token"}, "8 bits from 13 tokens back",
         lambda p, w, qc, val, key, qry: A.previous_token(p, val, back=13, name="back13"))
    attn("attention gather", {"gather"}, "1 and 5 tokens back",
         lambda p, w, qc, val, key, qry: A.gather(p, {1: val, 5: key}, name="g"))
    return out


def _erase_cases(n_tokens: int, seed: int) -> list[Case]:
    """Erasing dead variables: the features reused."""
    out = []
    rng = random.Random(f"{seed}:erase")
    prog = Program("erase")
    a = prog.input_bits("a", 16)
    b = prog.input_bits("b", 16)
    vocab = _vocab(prog, rng, 64, a=(0, 1 << 16), b=(0, 1 << 16))
    x = a
    for _ in range(6):                  # each xor dies when the next exists: erased, features reused
        x = G.bitwise(prog, "xor", x, b)
    out.append(Case("erase", {"erase"}, prog, _seq(vocab, rng, n_tokens),
                    "each dead value of a 6-xor chain (16 bits) erased, its features reused "
                    "(measured: the xors written over them)", measured={"bitwise"}))
    return out


def costs(compiled, prims: set) -> dict:
    """Layers spanned, residual features written, MLP neurons and heads of a row's nodes."""
    prog = compiled.program
    cfg = compiled.config
    group = cfg.linear_num_value_heads // cfg.linear_num_key_heads
    nodes = [n for n in prog.nodes if n.layer is not None and (n.primitive or "circuit") in prims]
    layers = {n.layer for n in nodes}
    subs = {(n.layer, n.kind) for n in nodes}
    dims = sum(v.size for n in nodes for v in n.outputs)
    neurons = sum(len(getattr(n, "neurons", [])) for n in nodes)
    gdn = sum(key_heads(n, group) for n in nodes if n.kind == "gdn")
    gdn_v = sum(len(field_chunks(n, group)) * group for n in nodes if n.kind == "gdn")
    attn = sum(n.ports for n in nodes if n.kind == "attn")
    if "erase" in prims:
        erased = sum(len(fs) for fs in compiled.layout.erase.values())
        neurons += erased
        layers |= {int(k.split("@")[1]) for k in compiled.report["margins"]["nodes"] if k.startswith("erase@")}
    return {"layers": (max(layers) - min(layers) + 1) if layers else 0,
            "mlp_levels": sum(1 for s in subs if s[1] == "mlp"),
            "gdn_layers": sum(1 for s in subs if s[1] == "gdn"),
            "attn_layers": sum(1 for s in subs if s[1] == "attn"),
            "dims": dims, "neurons": neurons, "gdn_heads": gdn, "gdn_value_heads": gdn_v if gdn else 0,
            "attn_heads": attn}


def _bf16_model(compiled):
    import torch
    from transformers import AutoModelForCausalLM
    with tempfile.TemporaryDirectory() as d:
        compiled.model().save_pretrained(d)
        m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
    m.eval()
    return m


def _measured(meas: dict, prims: set) -> dict:
    ps = [meas["primitives"][p] for p in prims if p in meas["primitives"]]
    code = min((p["min"] for p in ps), default=None)
    out = {"code_margin": code, "max_rel_dev": max((p["max_rel_dev"] for p in ps), default=0.0),
           "exact": meas["exact"]}
    if meas["memories"]:
        out["state_margin"] = min(m["min"] for m in meas["memories"].values())
    if meas["attention"]:
        out["score_gap"] = min(a["gap"] for a in meas["attention"].values())
    if not meas["exact"]:
        out["first_mismatch"] = [str(x) for x in meas["mismatches"][:2]]
    return out


def run_case(case: Case, bf16: bool = True, decode: bool = False) -> dict:
    from .run import measure_margins
    t0 = time.time()
    compiled = compile_program(case.prog)
    st = compiled.report["margins"]
    static = [st["primitives"][p] for p in case.primitives if p in st["primitives"]]
    row = {"primitive": case.name, "about": case.about, "tokens": len(case.tokens),
           "static": min(s["min"] for s in static),
           "static_node": min(static, key=lambda s: s["min"])["node"],
           "static_kinds": {k: v["min"] for k, v in st["kinds"].items()},
           "cost": costs(compiled, case.primitives)}
    mp = case.measured or case.primitives
    row["fp32"] = _measured(measure_margins(compiled, case.tokens, "prefill"), mp)
    if decode:
        row["fp32_decode"] = _measured(measure_margins(compiled, case.tokens, "decode"), mp)
    if bf16:
        b16 = _bf16_model(compiled)
        row["bf16"] = _measured(measure_margins(compiled, case.tokens, "prefill", b16), mp)
        if decode:
            row["bf16_decode"] = _measured(measure_margins(compiled, case.tokens, "decode", b16), mp)
    row["seconds"] = round(time.time() - t0, 1)
    return row


def _f(x, fmt="{:.4f}"):
    return "-" if x is None or (isinstance(x, float) and math.isinf(x)) else fmt.format(x)


def _merge(a: dict, b: dict | None) -> dict:
    """The worse of two measurements (prefill and decode)."""
    if b is None:
        return a
    out = dict(a)
    out["exact"] = a["exact"] and b["exact"]
    for k in ("code_margin", "state_margin", "score_gap"):
        if k in b and b[k] is not None:
            out[k] = min(a.get(k, math.inf), b[k])
    return out


def table(rows: list[dict]) -> str:
    """A markdown table: fp32 and bf16 figures are the worse of prefill and decode (when run)."""
    head = ("| primitive | what | static margin (fp32, >= 1 safe) | measured code margin fp32 | "
            "other measured fp32 | layers | residual dims | MLP neurons | heads | bf16 (measured) |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        c = r["cost"]
        m = _merge(r["fp32"], r.get("fp32_decode"))
        other = []
        if "state_margin" in m:
            other.append(f"state {m['state_margin']:.4f}")
        if "score_gap" in m:
            other.append(f"score gap {m['score_gap']:.2f}")
        heads = []
        if c["gdn_heads"]:
            heads.append(f"{c['gdn_heads']} GDN key ({c['gdn_value_heads']} value)")
        if c["attn_heads"]:
            heads.append(f"{c['attn_heads']} attn")
        levels = []
        if c["mlp_levels"]:
            levels.append(f"{c['mlp_levels']} MLP")
        if c["gdn_layers"]:
            levels.append(f"{c['gdn_layers']} GDN")
        if c["attn_layers"]:
            levels.append(f"{c['attn_layers']} attn")
        b = r.get("bf16")
        if b is None:
            bf = "-"
        else:
            b = _merge(b, r.get("bf16_decode"))
            gap = f", score gap {b['score_gap']:.3g}" if "score_gap" in b else ""
            if b["exact"]:
                bf = f"exact (margin {_f(b['code_margin'], '{:.3f}')}{gap})"
            else:
                bf = f"**fails** (margin {_f(b['code_margin'], '{:.3g}')}{gap})"
        lines.append(f"| {r['primitive']} | {r['about']} | {r['static']:.3f} | {_f(m['code_margin'], '{:.7f}')}"
                     f"{'' if m['exact'] else ' (MISMATCH)'} | {', '.join(other) or '-'} | "
                     f"{c['layers']} ({' + '.join(levels) or 'in other MLPs'}) | {c['dims']} | {c['neurons']} | "
                     f"{', '.join(heads) or '-'} | {bf} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qwengpu.compiler.report", description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=300, help="tokens per sequence (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-bf16", action="store_true", help="skip the bf16 runs")
    ap.add_argument("--no-decode", action="store_true", help="skip the cached decode path (prefill only)")
    ap.add_argument("--only", action="append", help="rows whose name contains this (repeatable)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import torch
    from transformers.utils import logging as hf_logging
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    rows = []
    for case in cases(args.tokens, args.seed):
        if args.only and not any(o in case.name for o in args.only):
            continue
        rows.append(run_case(case, bf16=not args.no_bf16, decode=not args.no_decode))
        if not args.json:
            print(f"  {case.name}: {rows[-1]['seconds']} s", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print(table(rows))
    return 0 if all(r["fp32"]["exact"] and r["static"] >= 1 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
