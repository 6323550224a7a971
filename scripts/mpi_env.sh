# Sourced by the scripts: lets mpirun start as root (containers, CI) and on
# machines with fewer cores than ranks. Values already set are kept.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
# Skip probing for interconnects a single machine does not have (~0.2 s a launch).
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
