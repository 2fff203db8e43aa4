/*
 * Slurm passes x87 `long double`s to priority_p_calc_fs_factor(). Rust has no f80 and
 * passes u128 in integer registers, so the exported Rust symbol is a naked jump to this
 * function, which converts the arguments and calls back into Rust with doubles.
 */
extern double fairway_calc_fs_factor(double usage_efctv, double shares_norm);

__attribute__((visibility("hidden")))
double fairway_calc_fs_factor_ld(long double usage_efctv, long double shares_norm)
{
	return fairway_calc_fs_factor((double) usage_efctv, (double) shares_norm);
}

/* Reads a `long double` field (usage_efctv, usage_raw...) as a double. */
__attribute__((visibility("hidden")))
double fairway_read_long_double(const void *p)
{
	return (double) *(const long double *) p;
}

/* Stores a double into a `long double` field. */
__attribute__((visibility("hidden")))
void fairway_write_long_double(void *p, double v)
{
	*(long double *) p = (long double) v;
}

/* Multiplies a `long double` field in place, in long double precision. */
__attribute__((visibility("hidden")))
void fairway_scale_long_double(void *p, double factor)
{
	*(long double *) p *= (long double) factor;
}

/* Adds to a `long double` field in place, in long double precision. */
__attribute__((visibility("hidden")))
void fairway_add_long_double(void *p, double v)
{
	*(long double *) p += (long double) v;
}
