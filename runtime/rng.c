/* rng.c: revc's pseudo-random numbers: xoshiro256** seeded by splitmix64.
 *
 * The output of every function here is part of revc's file formats:
 * checkpoints record only seeds, and a resumed run must shuffle and
 * initialise exactly as the original did.  Never change an algorithm or a
 * constant; tests/unit/test_rt_data.c pins the values.
 *
 * References: Blackman and Vigna, "Scrambled linear pseudorandom number
 * generators" (xoshiro256**, 2018); Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators" (splitmix64, 2014). */
#include "rt.h"

#define GOLDEN UINT64_C(0x9e3779b97f4a7c15)

/* splitmix64's output function, a bijection of 64-bit words. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* The four words are splitmix64 outputs of consecutive counters, so they are
 * never all zero (the one state xoshiro cannot leave). */
void rt_rng_seed(rt_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++) {
		seed += GOLDEN;
		r->s[i] = mix64(seed);
	}
}

uint64_t rt_rng_next(rt_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double rt_rng_uniform(rt_rng *r)
{
	return (double)(rt_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Rejection of the 2^64 mod n lowest outputs leaves a range whose size is a
 * multiple of n, so the remainder is exactly uniform.  Fewer than half of the
 * draws are ever rejected. */
uint64_t rt_rng_below(rt_rng *r, uint64_t n)
{
	if (n == 0)
		IR_DIE("rt_rng_below(0): empty range");
	uint64_t threshold = (0 - n) % n;
	for (;;) {
		uint64_t x = rt_rng_next(r);
		if (x >= threshold)
			return x % n;
	}
}

/* Each input passes through the bijective mixer with its own offset before
 * being folded in, so (seed, purpose, index) triples that differ in one
 * word give unrelated seeds. */
void rt_rng_derive(rt_rng *r, uint64_t seed, uint64_t purpose, uint64_t index)
{
	uint64_t h = mix64(seed + 1 * GOLDEN);
	h = mix64(h ^ mix64(purpose + 2 * GOLDEN));
	h = mix64(h ^ mix64(index + 3 * GOLDEN));
	rt_rng_seed(r, h);
}
