#!/usr/bin/env bash
# What --clip-grad-norm adds to a step: the default MLP at np=1 and np=2
# (synthetic data, 300 steps, 1 BLAS thread per rank), without clipping and
# with --clip-grad-norm 1, for each ddp_train given (e.g. builds of two
# commits), taking turns, ROUNDS times. The norm is taken in the optimizer
# phase, or while reducing (Note [Sum of squares while reducing]), so the
# table shows that phase beside the step (benchmarks/option_cost.sh).
#
#   bash benchmarks/clip_overhead.sh ROUNDS DDP_TRAIN [DDP_TRAIN ...]
set -euo pipefail
ROUNDS=$1 NPS="1 2" OFF="--clip-grad-norm 0" ON="--clip-grad-norm 1" \
  exec bash "$(dirname "$0")/option_cost.sh" "${@:2}"
