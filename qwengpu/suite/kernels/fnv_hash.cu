// fnv_hash: FNV-1a 32-bit hash over a byte string per lane (u8 loads, xor, mul.lo wrap), lanes of different lengths.
__global__ void fnv_hash(const unsigned char *data, const int *len, unsigned *out) {
    int i = threadIdx.x;
    unsigned h = 2166136261u;
    for (int k = 0; k < len[i]; k++) {
        h ^= data[i * 8 + k];
        h *= 16777619u;
    }
    out[i] = h;
}
