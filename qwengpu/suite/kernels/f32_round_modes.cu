// f32_round_modes: directed rounding intrinsics -- __fadd/__fmul/__fmaf/__fdiv _rz/_ru/_rd, __frcp_rn/_rz,
// __fsqrt_rn/_rz/_ru/_rd (add/mul/fma/div/rcp/sqrt .rz/.rp/.rm) and __saturatef (cvt.sat.f32.f32).
__global__ void f32_round_modes(const float *a, const float *b, const float *c, float *out) {
    int i = threadIdx.x;
    float x = a[i], y = b[i], z = c[i];
    float *o = out + 16 * i;
    o[0] = __fadd_rz(x, y);   o[1] = __fadd_ru(x, y);   o[2] = __fadd_rd(x, y);
    o[3] = __fmul_rz(x, y);   o[4] = __fmul_ru(x, y);   o[5] = __fmul_rd(x, y);
    o[6] = __fmaf_rz(x, y, z); o[7] = __fmaf_ru(x, y, z); o[8] = __fmaf_rd(x, y, z);
    o[9] = __fdiv_rz(x, y);   o[10] = __fdiv_ru(x, y);  o[11] = __frcp_rn(y);
    o[12] = __frcp_rz(y);
    o[13] = __fsqrt_ru(fabsf(x));
    o[14] = __fsqrt_rd(fabsf(z));
    o[15] = __saturatef(x);
}
