#!/bin/sh
# The official zookeeper image's entrypoint contract, for the operator's ZooKeeper StatefulSet:
# ZOO_* variables become $ZOO_CONF_DIR/zoo.cfg (unless one was mounted there) and ZOO_MY_ID the
# server's $ZOO_DATA_DIR/myid (unless the volume already has one), then the arguments run.
set -eu

config="$ZOO_CONF_DIR/zoo.cfg"
if [ ! -f "$config" ]; then
  {
    echo "dataDir=$ZOO_DATA_DIR"
    echo "dataLogDir=$ZOO_DATA_LOG_DIR"
    echo "tickTime=$ZOO_TICK_TIME"
    echo "initLimit=$ZOO_INIT_LIMIT"
    echo "syncLimit=$ZOO_SYNC_LIMIT"
    echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
    echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
    echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
    echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
    echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
    # One server on its own unless told the ensemble (space-separated server.N=host:2888:3888;2181)
    for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
      echo "$server"
    done
    if [ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ]; then
      echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
    fi
    # Any other setting, space-separated key=value
    for entry in ${ZOO_CFG_EXTRA:-}; do
      echo "$entry"
    done
  } >"$config"
fi
mkdir -p "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR"
if [ ! -f "$ZOO_DATA_DIR/myid" ]; then
  echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
fi
exec "$@"
