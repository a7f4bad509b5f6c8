"""`qwengpu fuzz --faults`: random kernels that may fault, the engines compared with each other.

The host C++ oracle cannot judge a fault, so here the interpreter is the reference: every other
engine must give the same outcome -- the same buffers, or a fault of the same kind
(`semantics.faults.FAULT_KINDS`), lane and address. A kernel (`fault_kernel(seed, index)`) is one of
a few families (out-of-bounds global/shared/local/atomic accesses, a caller's local array read
past its frame after a callee's, misaligned loads, barriers in divergent code, recursion, integer
division by zero) with a random faulting lane and a random knob that may or may not take it out
of bounds. A kernel the machine cannot hold (`DOES_NOT_FIT`) is counted, not a disagreement.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

#: what may not fit the machine without being a disagreement, as in `qwengpu fuzz`: (exception
#: name, message fragment)
DOES_NOT_FIT = (("RomOverflow", ""), ("AssemblerError", "global window"), ("AssemblerError", "local memory"))

FAMILIES = {
    "global": ('''
extern "C" __global__ void {name}(const int *in, int *out, int k) {{
    int t = threadIdx.x;
    out[t] = in[t + (t == {lane} ? k : 0)] + 1;
}}''', lambda r: [{"buffer": "int32", "data": [1, 2, 3, 4]}, {"buffer": "int32", "size": 4},
                  {"scalar": "int32", "value": r.choice([0, 1, 3, 4, 9, 100, -5, -1100])}]),
    "store": ('''
extern "C" __global__ void {name}(int *out, int k) {{
    int t = threadIdx.x;
    out[t + (t == {lane} ? k : 0)] = t + 1;
}}''', lambda r: [{"buffer": "int32", "size": 4}, {"scalar": "int32", "value": r.choice([0, 1, 4, 50, -2])}]),
    "misaligned": ('''
extern "C" __global__ void {name}(const int *in, int *out, int k) {{
    int t = threadIdx.x;
    out[t] = *(const {type} *)((const char *)in + (t == {lane} ? k : 0));
}}''', lambda r: [{"buffer": "int32", "data": [5, 6, 7, 8]}, {"buffer": "int32", "size": 4},
                  {"scalar": "int32", "value": r.choice([0, 1, 2, 4, 8])}]),
    "shared": ('''
extern "C" __global__ void {name}(const int *idx, int *out) {{
    __shared__ int s[4];
    int t = threadIdx.x;
    s[t] = 3 * t;
    __syncthreads();
    out[t] = s[idx[t]];
}}''', lambda r: [{"buffer": "int32", "data": [r.choice([0, 1, 2, 3, 4, 7, 300]) for _ in range(4)]},
                  {"buffer": "int32", "size": 4}]),
    "local": ('''
extern "C" __global__ void {name}(int *out, int k) {{
    int a[{n}];
    int t = threadIdx.x;
    for (int i = 0; i < {n}; i++) a[i] = out[i % 4] + t * i;
    out[t] = a[t == {lane} ? k : t % {n}];
}}''', lambda r: [{"buffer": "int32", "data": [1, 2, 3, 4]}, {"scalar": "int32", "value": r.choice([0, 2, 4, 5, 7, 8])}]),
    "frames": ('''
__device__ __noinline__ int helper(const int *in, int t) {{
    int b[{m}];
    for (int i = 0; i < {m}; i++) b[i] = in[(i + t) % 4] * 3;
    return b[in[t] % {m}];
}}
extern "C" __global__ void {name}(int *out, int k) {{
    int a[4];
    int t = threadIdx.x;
    for (int i = 0; i < 4; i++) a[i] = out[i] + t;
    int h = helper(out, t);
    out[t] = a[t == {lane} ? k : t] + h;
}}''', lambda r: [{"buffer": "int32", "data": [1, 2, 3, 4]}, {"scalar": "int32", "value": r.choice([1, 4, 5, 8, 12])}]),
    "atomic": ('''
extern "C" __global__ void {name}(int *out, int k) {{
    int t = threadIdx.x;
    atomicAdd(&out[t == {lane} ? k : t], t + 1);
}}''', lambda r: [{"buffer": "int32", "size": 4}, {"scalar": "int32", "value": r.choice([0, 3, 4, 16])}]),
    "barrier": ('''
extern "C" __global__ void {name}(int *out, int k) {{
    __shared__ int s[4];
    int t = threadIdx.x;
    s[t] = t;
    if (t < k) {{ __syncthreads(); out[t] = s[3 - t]; }}
    else out[t] = -t;
}}''', lambda r: [{"buffer": "int32", "size": 4}, {"scalar": "int32", "value": r.choice([0, 1, 2, 3, 4])}]),
    "recursion": ('''
__device__ __noinline__ void down(unsigned n, int *out) {{
    if (n == 0) {{ *out = 1; return; }}
    down(n - 1, out);
    *out += 2;
}}
extern "C" __global__ void {name}(int *out, int k) {{
    down((unsigned)k, out + threadIdx.x);
}}''', lambda r: [{"buffer": "int32", "size": 4}, {"scalar": "int32", "value": r.choice([1, 4, 200])}]),
    "division": ('''
extern "C" __global__ void {name}(int *out, int k) {{
    int t = threadIdx.x;
    int x = out[t];
    out[t] = (t & 1) ? x / k : (int)((unsigned)x % (unsigned)k);
}}''', lambda r: [{"buffer": "int32", "data": [r.randint(-2**31, 2**31 - 1) for _ in range(4)]},
                  {"scalar": "int32", "value": r.choice([0, 0, 1, -1, 7])}]),
}


@dataclass
class FaultKernel:
    name: str
    family: str
    source: str
    launch: dict


def fault_kernel(seed: int, index: int) -> FaultKernel:
    """Kernel `index` of `seed` (always the same)."""
    r = random.Random(f"faults-{seed}-{index}")
    family = r.choice(sorted(FAMILIES))
    text, args = FAMILIES[family]
    name = f"fzf_{seed}_{index}"
    source = text.format(name=name, lane=r.randrange(4), type=r.choice(["int", "short"]), n=r.choice([2, 4, 5]),
                         m=r.choice([2, 4]))       # two frames of 16 bytes: the machine's 32 per thread
    return FaultKernel(name, family, source, {"kernel": name, "grid": 1, "block": 4, "args": args(r)})


def outcome(kernel: FaultKernel, engine: str):
    """("ok", buffers) or ("fault", kind, lane, address) of the kernel's launch on `engine`."""
    import qwengpu
    options = {"progress": False} if engine in ("compact", "model", "compact-ref") else {}
    try:
        r = qwengpu.run(kernel.source, kernel.launch, engine=engine, **options)
    except Exception as e:        # a launch's fault (`ExecutionFault`: kind, lane, address) or any error
        if getattr(e, "kind", None) is None:
            return ("error", type(e).__name__, str(e).splitlines()[0])
        return ("fault", e.kind, e.lane, e.address)
    return ("ok", [b.tolist() if b is not None else None for b in r.buffers])


@dataclass
class FaultReport:
    seed: int
    count: int
    engines: tuple
    faulted: int = 0                                   # kernels that faulted on the interpreter
    checked: dict = field(default_factory=dict)        # engine -> kernels compared
    did_not_fit: dict = field(default_factory=dict)    # engine -> kernels the machine could not hold
    failures: list = field(default_factory=list)       # (name, engine, interp outcome, engine outcome, source)
    seconds: float = 0.0

    def summary(self) -> str:
        parts = ", ".join(f"{e} {n} agreed" + (f" ({self.did_not_fit[e]} did not fit the machine)"
                                                 if self.did_not_fit.get(e) else "")
                          for e, n in self.checked.items())
        return (f"fuzz --faults seed {self.seed}: {self.count} kernels ({self.faulted} faulted) in "
                f"{self.seconds:.0f} s; {parts}; {len(self.failures)} disagreement(s)")


def fuzz_faults(seed: int = 0, count: int = 50, start: int = 0, engines: tuple = ("sim",),
                log=None) -> FaultReport:
    """Run kernels start..start+count of `seed` on the interpreter and on `engines`."""
    t0 = time.time()
    rep = FaultReport(seed, count, tuple(engines))
    for i in range(start, start + count):
        k = fault_kernel(seed, i)
        ref = outcome(k, "interp")
        rep.faulted += ref[0] == "fault"
        for e in engines:
            got = outcome(k, e)
            if got[0] == "error" and any(got[1] == n and m in got[2] for n, m in DOES_NOT_FIT):
                rep.did_not_fit[e] = rep.did_not_fit.get(e, 0) + 1
            elif got == ref:
                rep.checked[e] = rep.checked.get(e, 0) + 1
            else:
                rep.failures.append((k.name, e, ref, got, k.source))
        if log:
            log(f"{k.name} ({k.family}): {ref[0]}" + (f" {ref[1]} lane {ref[2]}" if ref[0] == "fault" else ""))
    rep.seconds = time.time() - t0
    return rep
