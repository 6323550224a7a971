# Two "nodes" on one machine, for the multi-node tests (sourced after lib.sh).
#
# Each node is a network namespace with its own hostname, joined by a veth
# pair to a bridge in the root namespace; addresses come from 10.77.N.0/24
# and exist only on those links (no default route inside). mpirun starts the
# ranks in them through Open MPI's rsh launcher with a small agent script
# that maps a host name to its namespace (../shared/TOOLCHAIN.md, "Two
# nodes on one machine"). Everything is named after this shell's PID and
# removed by name in the EXIT trap, even when the test fails.
#
# Each node also has a private directory at the same path, $NODE_LOCAL (a
# bind mount in the node's own mount namespace), standing for a node-local
# /tmp: what rank 0 writes there, the other node cannot see.
#
#   nodes_up a b          create nodes a and b (exits 77 if namespaces are unavailable)
#   node_mpirun ARGS...   mpirun across them (add --host a:2,b:2 -np 4 ...)
NODES_TAG=d$$
NODES_NET=10.77.$(($$ % 200 + 20))
NODES=()
NODES_AGENT=$WORK/agent.sh
NODE_LOCAL=$WORK/node-local  # $NODE_LOCAL.<host> underneath

nodes_down() {
  for h in "${NODES[@]}"; do
    ip netns del "$NODES_TAG-$h" 2> /dev/null || true
    ip link del "${NODES_TAG}v$h" 2> /dev/null || true
  done
  ip link del "${NODES_TAG}br" 2> /dev/null || true
}
trap 'nodes_down; rm -rf "$WORK"' EXIT

nodes_up() {
  command -v ip > /dev/null || { echo "SKIP: no ip (iproute2): bash scripts/setup.sh installs it"; exit 77; }
  # ip netns bind-mounts /run/netns and makes / a slave mount: in a chroot
  # (/ not a mount point) that fails half-way and leaves a mount behind.
  mountpoint -q / ||
    { echo "SKIP: / is not a mount point (a chroot?): network namespaces cannot work here"; exit 77; }
  if ! ip netns add "$NODES_TAG-probe" 2> /dev/null ||
    ! ip netns exec "$NODES_TAG-probe" true 2> /dev/null; then
    ip netns del "$NODES_TAG-probe" 2> /dev/null || true
    echo "SKIP: cannot create network namespaces here (needs root and CAP_SYS_ADMIN)"
    exit 77
  fi
  ip netns del "$NODES_TAG-probe"
  ip link add "${NODES_TAG}br" type bridge
  ip addr add "$NODES_NET.254/24" dev "${NODES_TAG}br"  # mpirun runs in the root namespace
  ip link set "${NODES_TAG}br" up
  local i=1
  for h in "$@"; do
    NODES+=("$h")
    ip netns add "$NODES_TAG-$h"
    ip link add "${NODES_TAG}v$h" type veth peer name eth0 netns "$NODES_TAG-$h"
    ip link set "${NODES_TAG}v$h" master "${NODES_TAG}br" up
    ip -n "$NODES_TAG-$h" addr add "$NODES_NET.$i/24" dev eth0
    ip -n "$NODES_TAG-$h" link set eth0 up
    ip -n "$NODES_TAG-$h" link set lo up
    mkdir -p "$NODE_LOCAL.$h"
    i=$((i + 1))
  done
  mkdir -p "$NODE_LOCAL"
  # The agent: [options] HOST COMMAND -> COMMAND in HOST's namespace, with
  # HOST as its hostname (vader's shared-memory names include it) and its own
# $NODE_LOCAL (ip netns exec has given it a mount namespace of its own).
  cat > "$NODES_AGENT" << AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
exec ip netns exec "$NODES_TAG-\$host" unshare --uts sh -c "hostname \$host; mount --bind $NODE_LOCAL.\$host $NODE_LOCAL; exec sh -c \"\\\$0\"" "\$*"
AGENT
  chmod +x "$NODES_AGENT"
}

# --bind-to none: the "nodes" share this machine's cores, and Open MPI's
# per-node binding would pin rank 0 of each node to the same core; the two
# then take turns on it and every message waits a scheduler slice (8 ms
# measured for any all-reduce, against 20 us unbound). mpi_yield_when_idle:
# with more ranks than cores in all, waiting ranks must yield, as Open MPI
# does by itself when one node is oversubscribed (8 ms again otherwise).
node_mpirun() {
  timeout 120 mpirun --bind-to none --mca mpi_yield_when_idle 1 --mca plm_rsh_agent "$NODES_AGENT" --mca pml ob1 --mca btl self,vader,tcp \
    --mca btl_tcp_if_include "$NODES_NET.0/24" --mca oob_tcp_if_include "$NODES_NET.0/24" "$@"
}
