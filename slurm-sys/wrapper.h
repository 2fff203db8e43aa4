/* Public Slurm headers, as installed by libslurm-dev. */
#include <stdbool.h>
#include <stdint.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurmdb.h>
