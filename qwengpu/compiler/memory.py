"""GDN gadgets: a Gated DeltaNet layer's heads used as exact word memories.

One key head is one copy of a memory: its key dimension indexes slots, its value heads (the GQA
group of that key head) hold the word, split into fields. Keys and queries are one-hot (KEY_ON at
the slot, -KEY_OFF elsewhere, so SiLU then L2-norm gives an exact unit vector: the off slots are
exactly 0 in fp32, which lets the compact engine touch only the addressed rows); values are dual-rail bits
((L, 0) or (0, L) after SiLU), so every field read back has the same RMS, which the per-head
`RMSNormGated` needs; the read-out uses the positive rail only, so an unwritten slot or a disabled
read gives zeros. `A_log = -1e4` makes the decay exactly 1; beta = sigmoid(+-40) is 1 (overwrite) or
~0 (keep); beta is per value head, so fields are written independently (byte enables).

A memory with several read *ports* keeps one copy per port (one key head each); every write goes
to every copy in the same token, so all copies stay identical. A GDN layer writes before it reads,
so a read in the same token sees that token's write.

`previous(prog, var, back)` copies a variable from `back` tokens earlier (1..3) through the
layer's causal convolution.
"""
from __future__ import annotations

from dataclasses import dataclass

from .core import CompileError, Lin, Node, Var, evaluate_view
from .program import Program

KEY_ON = 40.0       # key/query pre-activation at the addressed slot (SiLU(x) == x from 17 on)
#: elsewhere: SiLU is exactly -0 in fp32 below -88.7 (exp overflows), and -KEY_OFF stays below that
#: with the form TAU = 0.1 off (a slope of KEY_ON + KEY_OFF), so keys and queries are exactly sparse
KEY_OFF = 112.0
KEY_SLOPE = KEY_ON + KEY_OFF
VALUE_L = 32.0      # value pre-activation magnitude
BETA_L = 40.0       # sigmoid(40) == 1.0 in fp32
Z_ON = 32.0         # silu(32) == 32


@dataclass
class Field:
    """A contiguous group of word bits held in one value head."""
    lo: int
    hi: int

    @property
    def width(self) -> int:
        return self.hi - self.lo


@dataclass
class Access:
    kind: str                       # "read" | "write"
    addr: Var                       # onehot slot (or a view)
    value: Var | None = None        # write: bits
    enable: Lin | None = None       # write: whole-word enable (0/1 form); read: enable
    field_enable: list | None = None  # write: per-field enable forms (override `enable`)
    out: Var | None = None          # read: result
    port: int = 0


class GDNMemory(Node):
    """A word memory in one GDN layer: `slots` words of `width` bits, in fields of `field_bits`
    (each field a value head, written by its own enable: a partial write). A `whole` memory is
    always written whole, with one enable: its fields are only a layout, which the compiler chooses
    as wide as the target's value heads allow (`lay_out`), so it takes the fewest key heads."""
    kind = "gdn"
    primitive = "memory"

    def __init__(self, prog: Program, name: str, slots: int, width: int, field_bits: int | None = None,
                 init: dict | None = None, whole: bool = False):
        super().__init__(name, [], [])
        self.prog = prog
        self.slots = slots
        self.width = width
        self.whole = whole
        step = field_bits or width
        #: the write granules (one enable each); the fields (value heads) split them when narrower
        self.granules = [Field(lo, min(lo + step, width)) for lo in range(0, width, step)]
        self.lay_out(step)
        self.writes: list[Access] = []
        self.reads: list[Access] = []
        self.init = dict(init or {})
        self.args: list[Var] = []
        prog.add_node(self)
        prog.memories.append(self)

    def lay_out(self, field_bits: int):
        """The word in fields of at most `field_bits`: a whole memory's fields are only a layout
        (the last one may be narrower); a partially written memory's write granule wider than
        that is split into several fields written by the granule's one enable."""
        if self.whole:
            self.fields = [Field(lo, min(lo + field_bits, self.width)) for lo in range(0, self.width, field_bits)]
            self.granule_of = [0] * len(self.fields)
        else:
            spans = [(i, Field(lo, min(lo + field_bits, g.hi))) for i, g in enumerate(self.granules)
                     for lo in range(g.lo, g.hi, field_bits)]
            self.granule_of = [i for i, _ in spans]
            self.fields = [f for _, f in spans]

    def field_enables(self, access: "Access") -> list | None:
        """The per-field enable forms of a partial write (each field's granule's enable), or None."""
        if access.field_enable is None:
            return None
        return [access.field_enable[g] for g in self.granule_of]

    @property
    def ports(self) -> int:
        return max(1, len(self.reads))

    def _check_addr(self, addr: Var, what: str):
        """Addresses are onehot over the slots, or binary (a key from the bits' match count)."""
        ok = (addr.kind == "onehot" and addr.size <= self.slots) or (addr.kind == "bits" and (1 << addr.size) <= self.slots)
        if not ok:
            raise CompileError(f"{self.name}: {what} address must be onehot or bits over <= {self.slots} slots")

    def _use(self, v: Var):
        self.args.append(v)
        for s in self.prog.sources(v):
            if s not in self.inputs:
                self.inputs.append(s)

    def write(self, addr: Var, value: Var, enable: Lin | Var | None = None, field_enable: list | None = None):
        """Write `value` at slot `addr` when `enable` (a 0/1 form or 1-bit var; default always).
        `field_enable` gives one 0/1 form per field instead (partial-word writes)."""
        if self.writes:
            raise CompileError(f"{self.name}: one write per token (a GDN head takes one key per token)")
        self._check_addr(addr, "write")
        if value.size != self.width:
            raise CompileError(f"{self.name}: value has {value.size} bits, words have {self.width}")
        if isinstance(enable, Var):
            self._use(enable)
            enable = enable.f(0)
        if field_enable is not None and self.whole:
            raise CompileError(f"{self.name}: a whole memory is written whole (one enable, no field enables)")
        if field_enable is not None and len(field_enable) != len(self.granules):
            raise CompileError(f"{self.name}: {len(self.granules)} fields need {len(self.granules)} enables")
        for v in (addr, value):
            self._use(v)
        for fe in field_enable or []:
            for name in fe.vars():
                self._use(self.prog.vars[name])
        if enable is not None:
            for name in enable.vars():
                self._use(self.prog.vars[name])
        self.writes.append(Access("write", addr, value, enable if enable is not None else Lin.const(1.0),
                                  field_enable))

    def read(self, addr: Var, name: str | None = None, enable: Lin | None = None) -> Var:
        """The word at slot `addr` (after this token's write). Each read uses its own port."""
        self._check_addr(addr, "read")
        self._use(addr)
        if enable is not None:
            for n in enable.vars():
                self._use(self.prog.vars[n])
        out = self.prog.bits_var(name or self.prog.fresh(f"{self.name}.rd"), self.width)
        out.producer = self
        self.outputs.append(out)
        self.reads.append(Access("read", addr, enable=enable, out=out, port=len(self.reads)))
        return out

    # -- reference semantics -----------------------------------------------------------------------

    def evaluate(self, env, state):
        mem = state.setdefault(self.name, dict(self.init))
        for w in self.writes:
            slot = evaluate_view(w.addr, env)
            val = evaluate_view(w.value, env)
            if w.field_enable is not None:
                old = mem.get(slot, 0)
                for f, fe in zip(self.granules, w.field_enable):
                    if round(self.prog.form_value(fe, env)) == 1:
                        m = ((1 << f.width) - 1) << f.lo
                        old = (old & ~m) | (val & m)
                mem[slot] = old
            elif round(self.prog.form_value(w.enable, env)) == 1:
                mem[slot] = val
        for r in self.reads:
            if r.enable is not None and round(self.prog.form_value(r.enable, env)) != 1:
                env[r.out.name] = 0
                continue
            env[r.out.name] = mem.get(evaluate_view(r.addr, env), 0)


class Previous(Node):
    """out = the value `var` had `back` tokens earlier (0 before the sequence start)."""
    kind = "gdn"
    primitive = "previous"

    def __init__(self, prog: Program, var: Var, back: int, name: str):
        if not 1 <= back <= 3:
            raise CompileError("previous(): the causal convolution reaches 1..3 tokens back")
        if var.kind != "bits":
            raise CompileError("previous() copies bits variables")
        out = prog.bits_var(name, var.size)
        super().__init__(name, prog.sources(var), [out])
        self.var = var
        self.back = back
        self.prog = prog
        self.width = var.size
        self.slots = 1
        self.fields = [Field(0, var.size)]
        prog.add_node(self)

    @property
    def ports(self) -> int:
        return 1

    def evaluate(self, env, state):
        hist = state.setdefault(self.name, [])
        hist.append(evaluate_view(self.var, env))
        env[self.outputs[0].name] = hist[-1 - self.back] if len(hist) > self.back else 0


def previous(prog: Program, var: Var, back: int = 1, name: str | None = None) -> Var:
    node = Previous(prog, var, back, name or prog.fresh(f"prev{back}({var.name})"))
    return node.outputs[0]


def key_form(addr, i: int) -> Lin:
    """Pre-activation of key dimension i for an address variable: KEY_ON at the address, <= -KEY_OFF
    elsewhere. A onehot address is read directly; a binary one through its match count."""
    if addr.kind == "onehot":
        return KEY_SLOPE * addr.f(i) - KEY_OFF if i < addr.size else Lin.const(-KEY_OFF)
    n = addr.size
    if i >> n:
        return Lin.const(-KEY_OFF)
    match = Lin()
    for bit in range(n):
        match = match + (addr.f(bit) if (i >> bit) & 1 else 1 - addr.f(bit))
    return KEY_SLOPE * (match - n) + KEY_ON


def bank_match(addr, bank: int, dk: int) -> Lin:
    """A form that is 1 when the address lies in bank `bank` (slots [bank dk, (bank + 1) dk)) and
    <= 0 otherwise."""
    if addr.kind == "onehot":
        m = Lin()
        for i in range(bank * dk, min((bank + 1) * dk, addr.size)):
            m = m + addr.f(i)
        return m
    low = dk.bit_length() - 1
    high = range(low, addr.size)
    m = Lin.const(1.0 - len(high))
    for bit in high:
        m = m + (addr.f(bit) if (bank >> (bit - low)) & 1 else 1 - addr.f(bit))
    return m
