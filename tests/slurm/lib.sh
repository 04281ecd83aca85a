# Shared by the Slurm tests (sourced): the slurm.conf lines every test cluster has, and the
# KJV corpus they train on.

# slurm_conf_common DIR MUNGE_SOCKET KILL_WAIT: root daemons, munge auth through our own
# socket, state/spool/pid/log files under DIR (%n: one set per node), no cgroups (linuxproc
# tracks processes: containers, CI), MPICH's PMI-2, cons_tres (GRES), nodes that claim more
# CPUs than the machine has (config_overrides), and requeue. cred_expire=20: Slurm holds a
# requeued job back for the credential lifetime + 1 s (so that its new launch credential is
# newer than the revocation of the old run's), 121 s by default; 20 s still leaves a loaded
# 2-core machine ample time between a step's credential and its launch.
slurm_conf_common() {
  cat <<EOF2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$2,cred_expire=20
CredType=cred/munge
StateSaveLocation=$1/state
SlurmdSpoolDir=$1/spool/%n
SlurmctldPidFile=$1/slurmctld.pid
SlurmdPidFile=$1/slurmd-%n.pid
SlurmctldLogFile=$1/log/slurmctld.log
SlurmdLogFile=$1/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=pmi2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
KillWait=$3
MinJobAge=600
JobRequeue=1
EOF2
}

# kjv_json RANGE: the verses of RANGE (bible -f "gen1:1-exo40:38") as loose JSON, one
# document per chapter (the format of scripts/demo.sh).
kjv_json() {
  bible -f "$1" | awk '
    function flush() { if (text != "") printf "{\"text\": \"%s\"}\n", text; text = "" }
    { ref = $1; sub(/:.*/, "", ref); line = $0; sub(/^[^ ]+ /, "", line)
      gsub(/\\/, "\\\\", line); gsub(/"/, "\\\"", line); gsub(/\t/, " ", line)
      if (ref != chapter) { flush(); chapter = ref; text = line } else text = text " " line }
    END { flush() }'
}
