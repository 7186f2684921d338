#!/usr/bin/env bash
# Stop the cluster started by tests/slurm/start_cluster.sh [STATE_DIR]: cancel its jobs, then end
# exactly the daemons whose pids it recorded in STATE_DIR (slurmd, slurmctld, munged) and remove
# its /etc/slurm/slurm.conf symlink. Nothing else is signalled. Safe to run twice, or when
# nothing is running.
set -uo pipefail

STATE=${1:-${ATTNSVM_SLURM_STATE:-/tmp/attnsvm-slurm}}
say() { echo "stop_cluster: $*" >&2; }

[ -d "$STATE" ] || { say "no state directory $STATE; nothing to stop"; exit 0; }
STATE=$(cd "$STATE" && pwd)

if [ -f "$STATE/slurm.conf" ] && [ -f "$STATE/slurmctld.pid" ] \
    && kill -0 "$(cat "$STATE/slurmctld.pid")" 2>/dev/null; then
    SLURM_CONF="$STATE/slurm.conf" timeout 10 scancel --full --quiet --user="$(id -un)" \
        2>/dev/null || true
fi

stop_pid() {  # name pidfile
    local name=$1 pidfile=$2 pid
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        # only if the recorded pid still is that daemon (pids are reused)
        if grep -q "$name" "/proc/$pid/comm" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            if kill -0 "$pid" 2>/dev/null; then
                say "$name ($pid) ignored SIGTERM; sending SIGKILL"
                kill -KILL "$pid" 2>/dev/null
            fi
            say "stopped $name ($pid)"
        else
            say "pid $pid in $pidfile is not $name any more; left alone"
        fi
    fi
    rm -f "$pidfile"
}

stop_pid slurmd "$STATE/slurmd.pid"
stop_pid slurmctld "$STATE/slurmctld.pid"
stop_pid munged "$STATE/munged.pid"
# the /etc/slurm/slurm.conf symlink that start_cluster.sh made, if it still points here
if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$STATE/slurm.conf" ]; then
    rm -f /etc/slurm/slurm.conf
fi
exit 0
