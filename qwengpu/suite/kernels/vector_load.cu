// vector_load: int4/float2 vector loads and stores (ld.global.v4.u32, ld.global.v2.f32, st.global.v4.u32).
__global__ void vector_load(const int4 *a, const float2 *b, int4 *out, float *fout) {
    int i = threadIdx.x;
    int4 v = a[i];
    float2 f = b[i];
    out[i] = make_int4(v.w, v.x + v.y, v.z ^ v.x, v.y - v.w);
    fout[i] = __fsub_rn(f.x, f.y);
}
