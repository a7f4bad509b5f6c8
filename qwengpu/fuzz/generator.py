"""Random CUDA kernels in the supported C subset, like Csmith: seeded and deterministic.

A kernel is a tree of statements (`Stmt`) over per-thread locals of five types (int, unsigned,
long long, unsigned long long, float), read from input buffers at the start and written to output
buffers at the end. Expressions use the prelude's safe-math helpers, so the C has no undefined
behaviour; statements are assignments, divergent if/else, bounded loops (with break/continue),
atomics on an accumulator buffer (order-independent: add, xor, or, and, max, min; the returned value
unused) and, at the top level only (every thread reaches them), shared-memory exchanges between
`__syncthreads()` and warp shuffles (blocks of 4 threads, width 4, mask 0xf).

Two sizes (`SIZES`): "small" kernels fit the built-in machine (blocks of 4 or 8 threads, shared
arrays of a word a thread); "large" kernels use a course's sizes (`compact-fpu-course`): blocks of up
to 64 threads, a 4 KiB shared table written at per-thread slots and read anywhere between barriers, a
256-byte local array per thread indexed by data, and a 16 KiB read-only table in global memory.
`fuzz` picks "large" on a machine that holds it (`sizes_for`).
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

import numpy as np

from ..launch import Arg, LaunchSpec

#: the local variable types: C spelling, launch dtype, and how many locals of each
TYPES = {"i": "int", "u": "unsigned", "l": "i64", "q": "u64", "f": "float"}
LOCALS = {"i": 2, "u": 2, "l": 1, "q": 1, "f": 2}
#: per-thread input words (ii: int32, il: int64, fi: float32) and the output buffers
IN_PER_THREAD = {"ii": 3, "il": 2, "fi": 3}
#: (buffer, the local types it receives, dtype): few buffers, so that few pointers stay live (the
#: machine has 32 registers; a 64-bit pointer takes two)
OUTPUTS = (("oi", "iu", "int32"), ("ol", "lq", "int64"), ("of", "f", "float32"))
#: one accumulator word per atomic operation: each operation is commutative and associative with
#: itself, so a word's final value does not depend on the order the threads reach it
ATOMICS = ("atomicAdd", "atomicXor", "atomicOr", "atomicAnd", "atomicMax", "atomicMin")
ACC_WORDS = len(ATOMICS)
#: how often each local type is picked for an assignment, a comparison, a shared exchange or a
#: shuffle: "all" weighs the five alike; "float" makes float the common case (the float unit's run)
MIXES = {"all": {t: 1 for t in "iulqf"}, "float": {"i": 1, "u": 1, "l": 1, "q": 1, "f": 12}}
PARAMS = "const int *ii, const i64 *il, const float *fi, int *oi, i64 *ol, float *of, unsigned *acc"


@dataclass(frozen=True)
class Sizes:
    """What a kernel's launch and memories may take: its block sizes (drawn from), and the words of
    its shared table, its local array per thread and its global table (0: none)."""
    blocks: tuple
    shared_words: int = 0
    local_words: int = 0
    global_words: int = 0


#: "small": the built-in machine's kernels (what the fuzzer always drew); "large": a course's sizes
SIZES = {"small": Sizes(blocks=(4, 4, 8)),
         "large": Sizes(blocks=(4, 16, 32, 64, 64), shared_words=1024, local_words=64, global_words=4096)}


def launch_bytes(sizes: Sizes) -> dict:
    """The most memory a kernel of `sizes` takes: {"global", "shared", "local", "threads"} (grids of
    up to 2 blocks; the global buffers as `FuzzKernel.spec` lays them out, 16-byte aligned)."""
    threads = 2 * max(sizes.blocks)
    words = {"ii": 4 * (IN_PER_THREAD["ii"] * threads + sizes.global_words), "il": 8 * IN_PER_THREAD["il"] * threads,
             "fi": 4 * IN_PER_THREAD["fi"] * threads, "acc": 4 * ACC_WORDS}
    for buf, types, dt in OUTPUTS:
        words[buf] = np.dtype(dt).itemsize * words_per_thread(types) * threads
    return {"global": sum((b + 15) // 16 * 16 for b in words.values()),
            "shared": 8 * max(sizes.blocks) + 4 * sizes.shared_words, "local": 4 * sizes.local_words,
            "threads": max(sizes.blocks)}


def sizes_for(machine) -> str:
    """The largest of `SIZES` whose kernels a machine (a name, or a geometry) holds."""
    from ..api import machine_sizes
    has = machine_sizes(machine)
    for name in ("large", "small"):
        need = launch_bytes(SIZES[name])
        if (need["threads"] <= has["threads"] and need["global"] <= has["global"] and need["shared"] <= has["shared"]
                and (not need["local"] or need["local"] <= has["local"] and need["threads"] <= has["local_threads"])):
            return name
    return "small"


def words_per_thread(types: str) -> int:
    """Output words per thread of a buffer receiving the locals of `types`."""
    return sum(LOCALS[t] for t in types)


@dataclass
class Stmt:
    """One statement: `line` (text, maybe several lines), `if` (text = condition; body, orelse) or
    `for` (text = the loop header; body)."""
    kind: str
    text: str
    body: list = field(default_factory=list)
    orelse: list = field(default_factory=list)


@dataclass
class FuzzKernel:
    seed: str
    name: str
    grid: int
    block: int
    body: list                       # the generated statements (the reducer deletes from this)
    inputs: dict                     # "ii"/"il"/"fi" -> np.ndarray
    acc: np.ndarray                  # the accumulator's initial words
    sizes: str = "small"             # one of `SIZES`

    @property
    def threads(self) -> int:
        return self.grid * self.block

    def source(self, body: list | None = None) -> str:
        """The kernel's text (without the prelude), valid CUDA and valid host C++ with it."""
        body = self.body if body is None else body
        lines = [f'extern "C" __global__ void {self.name}({PARAMS}) {{',
                 "    int t = threadIdx.x;",
                 "    int g = blockIdx.x * blockDim.x + threadIdx.x;",
                 f"    __shared__ int sh_i[{self.block}];",
                 f"    __shared__ float sh_f[{self.block}];"]
        lines += _large_memories(SIZES[self.sizes], self.threads)
        for ty, n in LOCALS.items():
            for k in range(n):
                lines.append(f"    {TYPES[ty]} {ty}{k} = {_initial(ty, k)};")
        lines += _render(body, 1)
        for buf, types, dt in OUTPUTS:
            n = words_per_thread(types)
            names = [f"{ty}{k}" for ty in types for k in range(LOCALS[ty])]
            cast = {"int32": "(int)", "int64": "(i64)", "float32": ""}[dt]
            for j, name in enumerate(names):
                lines.append(f"    {buf}[g * {n} + {j}] = {cast}{name};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def spec(self) -> LaunchSpec:
        args = [Arg("buffer", dt, data=self.inputs[name].copy())
                for name, dt in (("ii", "int32"), ("il", "int64"), ("fi", "float32"))]
        for _, types, dt in OUTPUTS:
            args.append(Arg("buffer", dt, data=np.zeros(self.threads * words_per_thread(types), dtype=dt)))
        args.append(Arg("buffer", "uint32", data=self.acc.copy()))
        return LaunchSpec(kernel=self.name, grid=(self.grid, 1, 1), block=(self.block, 1, 1), args=args)


def _large_memories(sz: Sizes, threads: int) -> list[str]:
    """The declarations of a kernel's larger memories: the global table (`gt`, the words of `ii`
    after the threads' own), the shared table (every word written before the first barrier, so that
    a read never meets memory no thread wrote) and the local array (every word written)."""
    lines = []
    if sz.global_words:
        lines.append(f"    const int *gt = ii + {IN_PER_THREAD['ii'] * threads};")
    if sz.shared_words:
        lines += [f"    __shared__ int sh_w[{sz.shared_words}];",
                  f"    for (int j = t; j < {sz.shared_words}; j += blockDim.x) sh_w[j] = j * 31 + (int)blockIdx.x;",
                  "    __syncthreads();"]
    if sz.local_words:
        lines += [f"    int loc[{sz.local_words}];",
                  f"    for (int j = 0; j < {sz.local_words}; ++j) loc[j] = fz_mul_i(j, g) ^ j;"]
    return lines


def _initial(ty: str, k: int) -> str:
    n = IN_PER_THREAD
    return {"i": f"ii[g * {n['ii']} + {k}]",
            "u": f"(unsigned)ii[g * {n['ii']} + {2 - k}] ^ {0x9e3779b9 * (k + 1) & 0xffffffff}u",
            "l": f"il[g * {n['il']} + {k}]",
            "q": f"(u64)il[g * {n['il']} + {1 - k}] * {0x2545F4914F6CDD1D + k}ull",
            "f": f"fi[g * {n['fi']} + {k}]"}[ty]


def _render(stmts: list, depth: int) -> list[str]:
    pad = "    " * depth
    out = []
    for s in stmts:
        if s.kind == "line":
            out += [pad + ln for ln in s.text.splitlines()]
        elif s.kind == "if":
            out.append(f"{pad}if ({s.text}) {{")
            out += _render(s.body, depth + 1)
            if s.orelse:
                out.append(f"{pad}}} else {{")
                out += _render(s.orelse, depth + 1)
            out.append(f"{pad}}}")
        else:
            out.append(f"{pad}for ({s.text}) {{")
            out += _render(s.body, depth + 1)
            out.append(f"{pad}}}")
    return out


# ---- values ---------------------------------------------------------------------------------

_INT_SPECIAL = [0, 1, -1, 2, 3, 7, 31, 32, 33, 255, -256, 0x7FFFFFFF, -0x80000000, 0x40000000, -2]
_I64_SPECIAL = [0, 1, -1, 63, 64, 0x7FFFFFFFFFFFFFFF, -0x8000000000000000, 0xFFFFFFFF, -0x100000000, 1 << 40]
_F32_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, float("inf"),
                float("-inf"), float("nan"), 1e10, -2.5, 16777217.0]


def _rand_int(r: random.Random, bits: int) -> int:
    c = r.random()
    if c < 0.35:
        return r.randint(-16, 16)
    if c < 0.6:
        pool = _INT_SPECIAL if bits == 32 else _I64_SPECIAL
        return r.choice(pool)
    return r.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _rand_f32(r: random.Random) -> float:
    c = r.random()
    if c < 0.3:
        return float(r.randint(-20, 20))
    if c < 0.5:
        return r.choice(_F32_SPECIAL)
    if c < 0.85:
        return float(np.float32(r.gauss(0, 10)))
    return struct.unpack("<f", struct.pack("<I", r.getrandbits(32)))[0]     # any bit pattern, NaNs included


def _f32_literal(x: float) -> str:
    text = format(float(np.float32(x)), ".9g")
    if "." not in text and "e" not in text:
        text += ".0"
    return f"({text}f)" if text.startswith("-") else f"{text}f"


def _literal(r: random.Random, ty: str) -> str:
    if ty == "f":
        x = _rand_f32(r)
        while x != x or x in (float("inf"), float("-inf")):      # no literal NaN/inf (they come from data)
            x = _rand_f32(r)
        return _f32_literal(x)
    v = _rand_int(r, 32 if ty in "iu" else 64)
    if ty == "i":
        return "FZ_I32_MIN" if v == -0x80000000 else (f"({v})" if v < 0 else str(v))
    if ty == "u":
        return f"{v & 0xFFFFFFFF}u"
    if ty == "l":
        return "FZ_I64_MIN" if v == -(1 << 63) else (f"({v}LL)" if v < 0 else f"{v}LL")
    return f"{v & 0xFFFFFFFFFFFFFFFF}ull"


# ---- expressions and statements -------------------------------------------------------------

_BIN = {
    "i": ["fz_add_i", "fz_sub_i", "fz_mul_i", "fz_div_i", "fz_mod_i", "fz_shl_i", "fz_shr_i", "&", "|", "^"],
    "u": ["+", "-", "*", "fz_div_u", "fz_mod_u", "fz_shl_u", "fz_shr_u", "&", "|", "^"],
    "l": ["fz_add_l", "fz_sub_l", "fz_mul_l", "fz_div_l", "fz_mod_l", "fz_shl_l", "fz_shr_l", "&", "|", "^"],
    "q": ["+", "-", "*", "fz_div_ul", "fz_mod_ul", "fz_shl_ul", "fz_shr_ul", "&", "|", "^"],
    "f": ["+", "-", "*", "/"],
}
_CAST = {   # from type -> text template producing the key type
    "i": {"u": "(int){}", "l": "(int){}", "q": "(int){}", "f": "fz_f2i({})"},
    "u": {"i": "(unsigned){}", "l": "(unsigned){}", "q": "(unsigned){}", "f": "fz_f2u({})"},
    "l": {"i": "(i64){}", "u": "(i64){}", "q": "(i64){}", "f": "fz_f2l({})"},
    "q": {"i": "(u64){}", "u": "(u64){}", "l": "(u64){}"},
    "f": {"i": "(float){}", "u": "(float){}", "l": "(float){}", "q": "(float){}"},
}


class _Gen:
    def __init__(self, r: random.Random, block: int, mix: str = "all", sizes: Sizes = SIZES["small"]):
        self.r, self.block = r, block
        self.weights = MIXES[mix]
        self.sizes = sizes
        self.loop_vars: list[str] = []
        self.loops = 0

    def expr(self, ty: str, depth: int) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            return self.leaf(ty)
        c = r.random()
        if c < 0.5:
            op = r.choice(_BIN[ty])
            a, b = self.expr(ty, depth - 1), self.expr(ty, depth - 1)
            return f"{op}({a}, {b})" if op[0].isalpha() else f"({a} {op} {b})"
        if c < 0.65:
            src = r.choice(list(_CAST[ty]))
            return _CAST[ty][src].format(self.expr(src, depth - 1))
        if c < 0.75:
            return f"({self.cond(depth - 1)} ? {self.expr(ty, depth - 1)} : {self.expr(ty, depth - 1)})"
        if ty == "f":
            k = r.random()
            if k < 0.4:
                return f"fmaf({self.expr('f', depth - 1)}, {self.expr('f', depth - 1)}, {self.expr('f', depth - 1)})"
            if k < 0.7:
                return f"sqrtf({self.expr('f', depth - 1)})"
            return f"(-{self.expr('f', depth - 1)})"
        if ty == "i" and r.random() < 0.5:
            return f"(int)({self.cond(depth - 1)})"
        neg = {"i": "fz_neg_i({})", "l": "fz_neg_l({})", "u": "(0u - {})", "q": "(0ull - {})"}[ty]
        return (neg if r.random() < 0.5 else "(~{})").format(self.expr(ty, depth - 1))

    def pick(self, types: str) -> str:
        """One of `types` by the mix's weights (under "all": `r.choice`, so the kernels of a seed
        stay what they were before mixes existed)."""
        if len({self.weights[t] for t in types}) == 1:
            return self.r.choice(types)
        return self.r.choices(types, weights=[self.weights[t] for t in types])[0]

    def leaf(self, ty: str) -> str:
        r = self.r
        if ty == "i" and (self.sizes.global_words or self.sizes.local_words) and r.random() < 0.2:
            return self.table_read()
        c = r.random()
        if c < 0.55:
            return f"{ty}{r.randrange(LOCALS[ty])}"
        if c < 0.8:
            return _literal(r, ty)
        idx = r.choice(["t", "g"] + self.loop_vars)
        return idx if ty == "i" else f"({TYPES[ty]}){idx}"

    def index(self, words: int) -> str:
        """A data-dependent index into a table of `words` (a power of two) words."""
        v = self.r.choice(["i0", "i1", "u0", "u1", "t", "g"] + self.loop_vars)
        return f"((unsigned)({v}) * {self.r.randrange(1, 1 << 16, 2)}u & {words - 1}u)"

    def table_read(self) -> str:
        """A word of the global table or of the thread's local array (large sizes)."""
        tables = [(n, w) for n, w in (("gt", self.sizes.global_words), ("loc", self.sizes.local_words)) if w]
        name, words = self.r.choice(tables)
        return f"{name}[{self.index(words)}]"

    def cond(self, depth: int) -> str:
        r = self.r
        if r.random() < 0.3:       # divergent on the thread index
            return r.choice([f"(t & {r.randint(1, 3)}) == 0", f"t < {r.randint(1, self.block - 1)}",
                             f"(g % 3) == {r.randint(0, 2)}", f"t != {r.randrange(self.block)}"])
        ty = self.pick("iulqf")
        op = r.choice(["<", "<=", ">", ">=", "==", "!="])
        return f"{self.expr(ty, depth)} {op} {self.expr(ty, depth)}"

    def assign(self) -> Stmt:
        ty = self.pick("iulqf")
        return Stmt("line", f"{ty}{self.r.randrange(LOCALS[ty])} = {self.expr(ty, self.r.randint(1, 3))};")

    def stmts(self, n: int, depth: int, top: bool) -> list:
        out = []
        for _ in range(n):
            c = self.r.random()
            if self.sizes.shared_words and top and self.r.random() < 0.1:
                out.append(self.shared_table_phase())
            elif self.sizes.local_words and self.r.random() < 0.1:
                out.append(Stmt("line", f"loc[{self.index(self.sizes.local_words)}] = {self.expr('i', 2)};"))
            elif top and c < 0.12:
                out.append(self.shared_phase())
            elif top and self.block == 4 and c < 0.22:
                out.append(self.shuffle())
            elif c < 0.32:
                word = self.r.randrange(ACC_WORDS)
                out.append(Stmt("line", f"{ATOMICS[word]}(&acc[{word}], {self.expr('u', 2)});"))
            elif depth < 2 and c < 0.47:
                out.append(Stmt("if", self.cond(2), self.stmts(self.r.randint(1, 3), depth + 1, False),
                                self.stmts(self.r.randint(0, 2), depth + 1, False)))
            elif depth < 2 and c < 0.57 and self.loops < 3:
                out.append(self.loop(depth))
            elif self.loop_vars and c < 0.62:
                out.append(Stmt("if", self.cond(1), [Stmt("line", self.r.choice(["break;", "continue;"]))]))
            else:
                out.append(self.assign())
        return out

    def loop(self, depth: int) -> Stmt:
        self.loops += 1
        var = f"k{self.loops}"
        bound = (str(self.r.randint(1, 4)) if self.r.random() < 0.5
                 else f"(int)(({self.expr('u', 2)}) & 3u)")       # data-dependent, at most 3
        self.loop_vars.append(var)
        body = self.stmts(self.r.randint(1, 3), depth + 1, False)
        self.loop_vars.pop()
        return Stmt("for", f"int {var} = 0; {var} < {bound}; ++{var}", body)

    def shared_phase(self) -> Stmt:
        """Every thread writes its slot, a barrier, each reads another's, a barrier (before the slots
        are written again)."""
        ty = self.pick("if")
        src = (f"(t + {self.r.randint(1, self.block - 1)}) % {self.block}" if self.r.random() < 0.6
               else f"({self.expr('u', 2)}) % {self.block}u")
        dst = f"{ty}{self.r.randrange(LOCALS[ty])}"
        return Stmt("line", f"sh_{ty}[t] = {self.expr(ty, 2)};\n__syncthreads();\n{dst} = sh_{ty}[{src}];\n"
                            "__syncthreads();")

    def shared_table_phase(self) -> Stmt:
        """Every thread writes its own slots of the shared table (t * 16 + c: distinct across the
        block's threads), a barrier, each reads any word, a barrier."""
        words = self.sizes.shared_words
        slot = f"(t * 16 + {self.r.randrange(16)}) & {words - 1}"
        ty = self.pick("iu")
        dst = f"{ty}{self.r.randrange(LOCALS[ty])}"
        cast = "" if ty == "i" else "(unsigned)"
        return Stmt("line", f"sh_w[{slot}] = {self.expr('i', 2)};\n__syncthreads();\n"
                            f"{dst} = {cast}sh_w[{self.index(words)}];\n__syncthreads();")

    def shuffle(self) -> Stmt:
        r = self.r
        ty = self.pick("iulqf")
        dst = f"{ty}{r.randrange(LOCALS[ty])}"
        val = self.expr(ty, 2)
        kind = r.choice(["idx", "xor", "up", "down"])
        if kind == "idx":
            src = str(r.randrange(4)) if r.random() < 0.5 else f"(int)(({self.expr('u', 1)}) & 3u)"
            call = f"__shfl_sync(0xfu, {val}, {src}, 4)"
        else:
            call = f"__shfl_{kind}_sync(0xfu, {val}, {r.randint(1, 3)}, 4)"
        return Stmt("line", f"{dst} = {call};")


def generate(seed: int, index: int, mix: str = "all", sizes: str = "small") -> FuzzKernel:
    """Kernel `index` of the run with seed `seed`, type mix `mix` (one of `MIXES`) and `sizes` (one
    of `SIZES`); the same four always give the same kernel."""
    if mix not in MIXES:
        raise ValueError(f"unknown type mix {mix!r} (known: {', '.join(MIXES)})")
    if sizes not in SIZES:
        raise ValueError(f"unknown sizes {sizes!r} (known: {', '.join(SIZES)})")
    tag = (f"{seed}:{index}" if mix == "all" else f"{seed}:{index}:{mix}") + ("" if sizes == "small" else f":{sizes}")
    r = random.Random(f"qwengpu-fuzz:{tag}")
    sz = SIZES[sizes]
    grid, block = r.choice([1, 1, 2]), r.choice(sz.blocks)
    gen = _Gen(r, block, mix, sz)
    body = gen.stmts(r.randint(2, 7), 0, True)
    n = grid * block
    inputs = {"ii": np.array([_rand_int(r, 32) for _ in range(n * IN_PER_THREAD["ii"] + sz.global_words)],
                             dtype=np.int32),
              "il": np.array([_rand_int(r, 64) for _ in range(n * IN_PER_THREAD["il"])], dtype=np.int64),
              "fi": np.array([_rand_f32(r) for _ in range(n * IN_PER_THREAD["fi"])], dtype=np.float32)}
    acc = np.array([r.getrandbits(32) for _ in range(ACC_WORDS)], dtype=np.uint32)
    prefix = "fz" + ("" if mix == "all" else mix[0]) + ("" if sizes == "small" else sizes[0])
    return FuzzKernel(seed=tag, name=f"{prefix}_{seed}_{index}", grid=grid, block=block, body=body,
                      inputs=inputs, acc=acc, sizes=sizes)
