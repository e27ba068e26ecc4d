/* Quantization (docs/protocol.md, "quantization"), in binary64 in the order the spec writes. */
#include "internal.h"

#include <math.h>

static int32_t quantize(float v, int32_t lo, int32_t hi)
{
    double m = (double)v;
    if (isnan(m))
        return lo;
    double x = floor(m * 64 + 0.5);
    if (x >= (double)hi)
        return hi;
    if (x <= (double)lo)
        return lo;
    return (int32_t)x;
}

int32_t nf_quantize_position(float m) { return quantize(m, NF_POS_MIN, NF_POS_MAX); }
int32_t nf_quantize_velocity(float m) { return quantize(m, NF_VEL_MIN, NF_VEL_MAX); }
double nf_dequantize(int32_t u) { return (double)u / 64; }

/* r is the binary64 nearest sqrt(2)/2. */
static const double ROT_R = 0.7071067811865476;

static double round_half_away(double x)
{
    if (x >= 0) {
        double f = floor(x);
        return x - f >= 0.5 ? f + 1 : f;
    }
    double f = floor(-x);
    return -(-x - f >= 0.5 ? f + 1 : f);
}

uint32_t nf_rotation_pack(double x, double y, double z, double w)
{
    double q[4] = {x, y, z, w};
    double n = sqrt(x * x + y * y + z * z + w * w);
    if (n == 0 || isinf(n) || isnan(n)) {
        q[0] = q[1] = q[2] = 0;
        q[3] = 1;
        n = 1;
    }
    int k = 0;
    for (int i = 1; i < 4; i++)
        if (fabs(q[i]) > fabs(q[k]))
            k = i;
    double s = 1 / n;
    if (q[k] < 0)
        s = -s;
    uint32_t packed = (uint32_t)k << 30;
    int shift = 20;
    for (int i = 0; i < 4; i++) {
        if (i == k)
            continue;
        double c = q[i] * s;
        if (isnan(c) || c < -ROT_R)
            c = -ROT_R;
        else if (c > ROT_R)
            c = ROT_R;
        double code = round_half_away((c + ROT_R) / (2 * ROT_R) * 1023);
        if (code < 0)
            code = 0;
        if (code > 1023)
            code = 1023;
        packed |= (uint32_t)code << shift;
        shift -= 10;
    }
    return packed;
}

void nf_rotation_unpack(uint32_t p, double out[4])
{
    int k = (int)(p >> 30);
    double q[4];
    double sum = 0;
    int shift = 20;
    for (int i = 0; i < 4; i++) {
        if (i == k)
            continue;
        uint32_t u = (p >> shift) & 1023;
        q[i] = (double)u / 1023 * (2 * ROT_R) - ROT_R;
        shift -= 10;
    }
    for (int i = 0; i < 4; i++)
        if (i != k)
            sum += q[i] * q[i];
    double d = 1 - sum;
    q[k] = sqrt(d > 0 ? d : 0);
    double n = sqrt(sum + q[k] * q[k]);
    for (int i = 0; i < 4; i++)
        out[i] = q[i] / n;
}
