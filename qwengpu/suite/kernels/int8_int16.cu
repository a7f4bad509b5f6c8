// int8_int16: char/short buffers -- sign/zero extension on load, truncating stores, mixed-width arithmetic.
__global__ void int8_int16(const signed char *c, const unsigned char *uc, const short *s, const unsigned short *us,
                           int *wide, signed char *c_out, short *s_out) {
    int i = threadIdx.x;
    int a = c[i], b = uc[i], d = s[i], e = us[i];           // sign vs zero extension
    wide[4 * i + 0] = a + b;
    wide[4 * i + 1] = d * a - e;
    wide[4 * i + 2] = (int)(signed char)(d + 100);         // truncate to 8 bits, then sign-extend
    wide[4 * i + 3] = (int)(unsigned short)(a * 300);       // truncate to 16 bits, zero-extend
    c_out[i] = (signed char)(b * 3 + a);                    // st.global.u8
    s_out[i] = (short)(d ^ (e << 4));                       // st.global.u16
}
