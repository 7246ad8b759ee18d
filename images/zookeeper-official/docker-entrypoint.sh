#!/bin/bash
# What the official `zookeeper` image's /docker-entrypoint.sh does (zookeeper:3.9), written again
# here: started as root to run the server, it gives the data, transaction log and log directories
# to the image's user `zookeeper` (uid 1000) and runs itself again as that user; as any other user
# it writes $ZOO_CONF_DIR/zoo.cfg from the ZOO_* variables unless the file is there (appending, as
# the original does), and $ZOO_DATA_DIR/myid from ZOO_MY_ID unless it is there, then runs its
# arguments. A user other than root or 1000 cannot write the image's /conf (uid 1000, mode 0755).
set -e

if [[ "$1" == zkServer.sh && "$(id -u)" == 0 ]]; then
  chown -R zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
  exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups "$0" "$@"
fi

config="$ZOO_CONF_DIR/zoo.cfg"
if [[ ! -f "$config" ]]; then
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
  } >>"$config"
  # space-separated server.N=host:2888:3888;2181 entries; one server on its own by default
  for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
    echo "$server" >>"$config"
  done
  if [[ -n "$ZOO_4LW_COMMANDS_WHITELIST" ]]; then
    echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST" >>"$config"
  fi
  # any other setting, space-separated key=value
  for entry in $ZOO_CFG_EXTRA; do
    echo "$entry" >>"$config"
  done
fi

if [[ ! -f "$ZOO_DATA_DIR/myid" ]]; then
  echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
fi

exec "$@"
