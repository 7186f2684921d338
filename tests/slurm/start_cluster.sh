#!/usr/bin/env bash
# Start a throwaway single-node SLURM cluster on localhost (for tests/test_slurm.py and CI).
#
#   sudo tests/slurm/start_cluster.sh [STATE_DIR]      # default STATE_DIR=/tmp/attnsvm-slurm
#   export SLURM_CONF=STATE_DIR/slurm.conf             # then sinfo, sbatch, squeue, snakemake
#   sudo tests/slurm/stop_cluster.sh [STATE_DIR]
#
# Needs root (SlurmUser=root) and Debian/Ubuntu: installs slurm-wlm and munge with apt-get when
# slurmctld, slurmd or munged is missing. Everything it creates lives in STATE_DIR: its own munge
# key and socket, slurm.conf, gres.conf, spool/state directories, logs and pid files. The one
# thing outside it is the symlink /etc/slurm/slurm.conf -> STATE_DIR/slurm.conf (job steps need
# the default path, see below); the script stops if that path holds another configuration, so a
# host's own SLURM is never overwritten; stop_cluster.sh removes the link. The host's munge
# (/etc/munge, /run/munge) is not used or touched. Daemons started: munged, slurmctld, slurmd; their pids
# are in STATE_DIR/*.pid, which stop_cluster.sh reads to end exactly these.
#
# The node: this machine's CPUs and (almost all of its) memory, plus ATTNSVM_SLURM_GPUS
# (default 2) *placeholder* GPUs: GRES gpu whose device files are symlinks to /dev/null (SLURM
# 22.05 rejects a gres.conf `Count=` without `File=`, see below). --gpus / --gres=gpu requests
# are scheduled against them and the job sees CUDA_VISIBLE_DEVICES, but there is no GPU, so
# attnsvm's device=auto trains on the CPU. Partitions: `cpu` (default)
# and `gpu`, both on this node. No accounting (sacct does not work): Snakemake's SLURM plugin
# needs --slurm-no-account --slurm-status-command squeue.
set -euo pipefail

STATE=${1:-${ATTNSVM_SLURM_STATE:-/tmp/attnsvm-slurm}}
PORT=${ATTNSVM_SLURM_PORT:-6817}        # slurmctld; slurmd uses PORT+1
GPUS=${ATTNSVM_SLURM_GPUS:-2}
TIMEOUT=${ATTNSVM_SLURM_TIMEOUT:-60}    # seconds to wait for the node to become idle
MAX_JOBS=${ATTNSVM_SLURM_MAX_JOBS:-100000}  # jobs (array tasks included) slurmctld holds at once
MAX_ARRAY=${ATTNSVM_SLURM_MAX_ARRAY:-1001}   # array task indices stay below it (SLURM's default)

say() { echo "start_cluster: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (SlurmUser=root); try sudo"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
    command -v apt-get >/dev/null || die "slurmctld/slurmd/munged missing and no apt-get"
    say "installing slurm-wlm and munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null \
        || die "apt-get install slurm-wlm munge failed"
fi

if [ -f "$STATE/slurmctld.pid" ] && kill -0 "$(cat "$STATE/slurmctld.pid")" 2>/dev/null; then
    die "a cluster from $STATE is already running; run stop_cluster.sh $STATE first"
fi

mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
rm -rf "$STATE/munge" "$STATE/ctld" "$STATE/spool" "$STATE/log"
mkdir -p "$STATE/munge" "$STATE/ctld" "$STATE/spool" "$STATE/log"
chmod 700 "$STATE/munge"

# --- munge: own key, socket, pid and log in STATE ---------------------------------------------
dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1 count=1024 status=none
chmod 400 "$STATE/munge/munge.key"
SOCK="$STATE/munge/munge.socket"
# --force: munged refuses some root-owned/permissive setups (e.g. /tmp) without it.
munged --force --key-file="$STATE/munge/munge.key" --socket="$SOCK" \
    --pid-file="$STATE/munged.pid" --log-file="$STATE/log/munged.log" \
    --seed-file="$STATE/munge/munged.seed" \
    || die "munged failed to start; see $STATE/log/munged.log"
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
munge -S "$SOCK" -n | unmunge -S "$SOCK" >/dev/null || die "munge round trip failed"

# --- slurm.conf / gres.conf ------------------------------------------------------------------
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
REAL_MB=$((MEM_MB - 512))     # leave a little for the OS
GRES_NODE=""
GRES_TYPES=""
if [ "$GPUS" -gt 0 ]; then
    GRES_NODE="Gres=gpu:$GPUS"
    GRES_TYPES="GresTypes=gpu"
    # SLURM 22.05's slurmd drops file-less GPUs ("Removing file-less GPU ... from final GRES
    # list") and then drains the node (count 0 < configured), and it insists on character or
    # block devices: so each GPU is a symlink STATE/dev/nvidiaN -> /dev/null. Nothing opens them
    # (TaskPlugin=task/none, no device cgroup); they only give SLURM a device per GPU, and the
    # job gets CUDA_VISIBLE_DEVICES, which torch ignores without a CUDA driver.
    rm -rf "$STATE/dev"
    mkdir -p "$STATE/dev"
    for ((i = 0; i < GPUS; i++)); do ln -s /dev/null "$STATE/dev/nvidia$i"; done
    echo "NodeName=$HOST Name=gpu File=$STATE/dev/nvidia[0-$((GPUS - 1))]" >"$STATE/gres.conf"
else
    : >"$STATE/gres.conf"
fi
cat >"$STATE/slurm.conf" <<EOF
# Written by tests/slurm/start_cluster.sh: single-node test cluster, no accounting.
ClusterName=attnsvm
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
# keep finished jobs visible to squeue for 10 min (the Snakemake plugin's squeue status check)
MinJobAge=600
# queued array tasks count as jobs: slurmctld's default of 10000 refuses ("Resource temporarily
# unavailable") the last array of bench/bench_rehearsal.py's 10^4 blocks; clusters set more
MaxJobCount=$MAX_JOBS
MaxArraySize=$MAX_ARRAY
SlurmctldTimeout=30
SlurmdTimeout=30
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
$GRES_TYPES
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$REAL_MB $GRES_NODE State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST Default=NO MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$STATE/slurm.conf"

# Clients must also find the config without SLURM_CONF: inside a job, Snakemake's slurm-jobstep
# executor (0.6.x) removes every SLURM_* variable except the job's identity from the environment
# of its nested `srun`, SLURM_CONF included, so srun falls back to /etc/slurm/slurm.conf (and then
# to a DNS SRV lookup, which fails). Link the default path to our config unless it is taken.
ETC_CONF=/etc/slurm/slurm.conf
if [ -L "$ETC_CONF" ] && [[ "$(readlink "$ETC_CONF")" == */slurm.conf ]] \
    && ! [ -e "$ETC_CONF" ]; then
    rm -f "$ETC_CONF"   # dangling link left by an earlier test cluster
fi
if [ -e "$ETC_CONF" ] || [ -L "$ETC_CONF" ]; then
    if [ "$(readlink -f "$ETC_CONF")" != "$SLURM_CONF" ]; then
        if grep -q "^# Written by tests/slurm/start_cluster.sh" "$ETC_CONF" 2>/dev/null; then
            rm -f "$ETC_CONF"
        else
            die "$ETC_CONF exists and is not ours: this host has its own SLURM configuration"
        fi
    fi
fi
mkdir -p /etc/slurm
ln -sfn "$SLURM_CONF" "$ETC_CONF"

# --- daemons ---------------------------------------------------------------------------------
# -i: ignore state files from an earlier run; -c: clear saved jobs.
slurmctld -c -i -f "$SLURM_CONF" || die "slurmctld failed; see $STATE/log/slurmctld.log"
slurmd -f "$SLURM_CONF" || die "slurmd failed; see $STATE/log/slurmd.log"

say "waiting up to ${TIMEOUT}s for node $HOST to become idle"
state=""
for _ in $(seq $((TIMEOUT * 2))); do
    state=$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -n1 || true)
    [ "$state" = idle ] && break
    sleep 0.5
done
if [ "$state" != idle ]; then
    say "node state: '${state:-none}'"
    tail -n 30 "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log" >&2 || true
    die "node $HOST did not become idle"
fi
sinfo >&2
say "cluster up; run: export SLURM_CONF=$SLURM_CONF"
echo "$SLURM_CONF"
