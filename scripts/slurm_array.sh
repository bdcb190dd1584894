#!/bin/bash
# A bench sweep on every node of a Slurm array, on all of the node's GPUs, each node into its own directory of a
# shared results directory: results/fleet/<hostname>/<run_id>-<gpu>.parquet.
#
# Submit from the repository checkout (its .venv installed), on a file system every node sees; --array on the
# command line replaces the one below (N + 1 nodes: --array=0-N):
#   sbatch --array=0-7 scripts/slurm_array.sh
#   BENCH_FLEET=results/fleet-$(date +%F) sbatch scripts/slurm_array.sh    # a dated snapshot
# When the array is done, from any machine that sees the directory:
#   python -m bench report results/fleet
#
#SBATCH --job-name=bench-fleet
#SBATCH --array=0-3
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --time=00:30:00
set -euo pipefail

cd "${SLURM_SUBMIT_DIR:?submit with sbatch}"
. .venv/bin/activate
srun --ntasks=1 python -m bench sweep --devices all --out "${BENCH_FLEET:-results/fleet}/$(hostname)/"
