"""printf in kernels (`qwengpu.ptx.printf`, `qwengpu.semantics.printf`): vprintf calls become PTX that
appends records to a buffer in global memory; every engine runs that PTX and one formatter gives the
text, so the interpreter and the machine print the same thing. Expected texts here are C's printf,
written out by hand."""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from qwengpu import load_program, run, suite
from qwengpu.semantics.printf import format_one, printf_output
from qwengpu.ptx.parser import PTXSyntaxError
from qwengpu.ptx.printf import PRINTF_BYTES, PRINTF_VAR, parse_format
from qwengpu.suite.oracles import PRINTF_TEXT

BASIC = PRINTF_TEXT["printf_basic"]          # the suite kernel's expected output, written out once

LOOP = r'''
.version 9.0
.target sm_75
.address_size 64
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.global .align 1 .b8 $str[7] = {37, 100, 58, 37, 100, 10};
.visible .entry _Z4spami(
	.param .u32 _Z4spami_param_0
)
{
	.local .align 8 .b8 	__local_depot0[8];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .pred 	%p<3>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<6>;
	mov.u64 	%SPL, __local_depot0;
	cvta.local.u64 	%SP, %SPL;
	ld.param.u32 	%r4, [_Z4spami_param_0];
	setp.lt.s32 	%p1, %r4, 1;
	@%p1 bra 	$L__BB0_3;
	add.u64 	%rd2, %SP, 0;
	add.u64 	%rd1, %SPL, 0;
	mov.u32 	%r7, 0;
	mov.u32 	%r1, %tid.x;
	mov.u64 	%rd3, $str;
	cvta.global.u64 	%rd4, %rd3;
$L__BB0_2:
	.pragma "nounroll";
	st.local.v2.u32 	[%rd1], {%r1, %r7};
	{ // callseq 0, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd4;
	.param .b64 param1;
	st.param.b64 	[param1+0], %rd2;
	.param .b32 retval0;
	call.uni (retval0),
	vprintf,
	(
	param0,
	param1
	);
	ld.param.b32 	%r6, [retval0+0];
	} // callseq 0
	add.s32 	%r7, %r7, 1;
	setp.lt.s32 	%p2, %r7, %r4;
	@%p2 bra 	$L__BB0_2;
$L__BB0_3:
	ret;
}
'''


@pytest.mark.parametrize("engine", ["interp", "sim"])
def test_suite_kernel_prints_c_text(engine):
    k = suite.get("printf_basic")
    res = run(k.ptx(), k.spec(), engine=engine)
    assert res.printf.text() == BASIC and res.printf.dropped == 0
    assert res.printf.by_thread()[2] == ["[2] 65535 65535| 0000ffff 1000.12\n", "c lane 196605 562941363486720\n"]


def test_verify_checks_the_printf_text():
    from qwengpu.verify import check_result
    k = suite.get("printf_basic")
    assert k.expected_printf() == BASIC and suite.get("dot").expected_printf() is None
    res = run(k.ptx(), k.spec())
    row = check_result(k, "interp", res, 0.0)
    assert row.exact and "printf" in row.checked
    res.printf.records[0] = (0, "[0] wrong\n")
    row = check_result(k, "interp", res, 0.0)
    assert not row.exact and "printf output differs at character 15" in row.detail


def test_records_are_the_same_bytes_on_every_engine():
    """The printf buffer is ordinary global memory written by ordinary PTX: the simulator's records
    equal the interpreter's, in the same order."""
    k = suite.get("printf_basic")
    a, b = run(k.ptx(), k.spec()), run(k.ptx(), k.spec(), engine="sim")
    assert a.printf.records == b.printf.records and len(a.printf.records) == 8


@pytest.mark.parametrize("engine", ["interp", "sim"])
def test_output_is_capped_with_a_message(engine):
    spec = {"grid": 1, "block": 4, "args": [{"scalar": "int32", "value": 20}]}
    out = run(LOOP, spec, engine=engine).printf
    # records of 16 bytes: (PRINTF_BYTES - 4) // 16 fit, the rest is counted
    assert len(out.records) == (PRINTF_BYTES - 4) // 16 and out.dropped == 80 * 16 - len(out.records) * 16
    assert out.text().endswith("bytes of records did not fit the 508-byte printf buffer")
    assert out.records[:3] == [(0, "0:0\n"), (1, "1:0\n"), (2, "2:0\n")]
    small = run(LOOP, {"grid": 1, "block": 2, "args": [{"scalar": "int32", "value": 3}]}, engine=engine).printf
    assert small.text() == "[thread 0] 0:0\n[thread 0] 0:1\n[thread 0] 0:2\n[thread 1] 1:0\n[thread 1] 1:1\n[thread 1] 1:2"


def test_module_gets_the_buffer_and_no_call_remains():
    m = load_program(LOOP)
    assert m.vars[PRINTF_VAR].size == PRINTF_BYTES and len(m.printf_calls) == 1
    assert not any(i.op == "call" for f in m.functions.values() for i in f.body)
    assert m.printf_calls[0].fmt == b"%d:%d\n" and m.printf_calls[0].arg_bytes == 8
    assert load_program(m) is m and len(m.printf_calls) == 1          # validating again changes nothing


def test_without_printf_there_is_no_output():
    k = suite.get("dot")
    assert run(k.ptx(), k.spec()).printf is None
    assert printf_output(load_program(k.ptx()), k.spec(), bytes(8)).records == []


def _fmt(fmt: str, *args) -> str:
    """format_one with the arguments packed as nvcc packs them (natural alignment)."""
    convs, n = parse_format(fmt)
    buf = bytearray(n)
    for c, a in zip(convs, args):
        if isinstance(a, float):
            buf[c.offset:c.offset + 8] = struct.pack("<d", a)
        else:
            buf[c.offset:c.offset + c.size] = (a & ((1 << (8 * c.size)) - 1)).to_bytes(c.size, "little")
    return format_one(load_program(LOOP), None, fmt.encode(), convs, bytes(buf))


def test_conversions_as_c_prints_them():
    assert _fmt("%d|%i|%u|%x|%X|%o", -1, 42, -1, 255, 255, 8) == "-1|42|4294967295|ff|FF|10"
    assert _fmt("%#x|%#o|%#o|%#x", 255, 8, 0, 0) == "0xff|010|0|0"
    assert _fmt("%5d|%-5d|%05d|%+d|% d", 42, 42, 42, 42, 42) == "   42|42   |00042|+42| 42"
    assert _fmt("%hhd|%hd|%hu|%hhx", 0x1FF, 0x18000, -1, 0x1AB) == "-1|-32768|65535|ab"
    assert _fmt("%ld|%lld|%lu|%llx|%zu", -5, -(2 ** 40), -1, 2 ** 40, 7) == \
        f"-5|{-(2 ** 40)}|{2 ** 64 - 1}|10000000000|7"
    assert _fmt("%f|%.1f|%8.3f|%e|%.2E|%g|%G", 1.5, 0.25, -3.14159, 12345.678, 0.000123, 1e-5, 1e20) == \
        "1.500000|0.2|  -3.142|1.234568e+04|1.23E-04|1e-05|1E+20"
    assert _fmt("%c%c|%3c|%-3c|", 72, 105, 65, 66) == "Hi|  A|B  |"
    assert _fmt("100%% %p", 0x1000) == "100% 0x1000"
    convs, n = parse_format("%c %s %ld %lld")
    assert [(c.offset, c.size) for c in convs] == [(0, 4), (8, 8), (16, 8), (24, 8)] and n == 32


def test_unsupported_formats_name_the_line():
    with pytest.raises(PTXSyntaxError, match="line 7.*widths"):
        parse_format("%*d", 7)
    with pytest.raises(PTXSyntaxError, match="%n"):
        parse_format("%n")
    with pytest.raises(PTXSyntaxError, match="long double"):
        parse_format("%Lf")


def test_cli_shows_printf_and_json_has_it():
    k = suite.get("printf_basic")
    argv = [sys.executable, "-m", "qwengpu", "run", str(k.ptx_path), "--launch", str(k.spec_path)]
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "printf output" in p.stdout and "  [thread 1] b lane -126 -360777252864" in p.stdout
    p = subprocess.run(argv + ["--json"], capture_output=True, text=True)
    out = json.loads(p.stdout)
    assert out["printf"]["dropped"] == 0 and out["printf"]["records"][4] == [0, "a lane 21 60129542144\n"]
