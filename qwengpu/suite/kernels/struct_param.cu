// struct_param: structs passed by value as kernel params (.param .align N .b8 p[SIZE], fields read with ld.param at offsets).
// Launch-spec convention: a struct argument is given as one scalar of the struct's size holding its raw little-endian
// bytes (here 8 bytes each: uint64 scalars).
struct Affine { int scale; short offset; unsigned char shift; signed char bias; };   // 8 bytes, align 4
struct Range { float lo; float hi; };                                                  // 8 bytes, align 4

__global__ void struct_param(const int *x, Affine aff, Range r, int *out, float *fout) {
    int i = threadIdx.x;
    int v = x[i];
    out[i] = ((v * aff.scale + aff.offset) >> aff.shift) + aff.bias;
    fout[i] = fminf(fmaxf((float)v, r.lo), r.hi);
}
