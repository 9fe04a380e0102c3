#!/bin/sh
# Open MPI's remote launcher (plm_rsh_agent) for "nodes" that are this
# machine: runs the daemon here, as ssh would there, in a UTS namespace
# named after the host so that Open MPI's processes on it see another
# node (shared memory only among a node's own ranks, TCP between nodes).
# Usage: mpirun --hostfile FILE --mca plm_rsh_agent tools/fake-node-rsh.sh
# (hostfile lines: 127.0.0.1 slots=N, 127.0.0.2 slots=N, ...), with
# --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo.
host="$1"
shift
exec unshare --uts sh -c "hostname node-$host && exec $*"
