#!/bin/bash
# `zkServer.sh start-foreground [CONFIG]` as ZooKeeper's own script runs it in the official image:
# the configuration directory is $ZOOCFGDIR (/conf), first on the class path (its logging
# configuration), and the configuration file $ZOOCFGDIR/zoo.cfg unless CONFIG names another (a
# path with a directory of its own is taken as it is, a bare name inside $ZOOCFGDIR); the log
# directory is made when it is not writable. The server is Debian's (libzookeeper-java).
set -eu

cfgdir="${ZOOCFGDIR:-/conf}"
config="$cfgdir/zoo.cfg"
if [[ -n "${2:-}" ]]; then
  config="$cfgdir/$2"
  if [[ "$(dirname "$config")" != "$cfgdir" ]]; then
    config="$2"
  fi
fi

case "${1:-}" in
  start-foreground)
    if [[ ! -w "$ZOO_LOG_DIR" ]]; then
      mkdir -p "$ZOO_LOG_DIR"
    fi
    echo "Using config: $config" >&2
    # JVMFLAGS is a list of options: split on purpose
    # shellcheck disable=SC2086
    exec java "-Dzookeeper.log.dir=$ZOO_LOG_DIR" "-Dzookeeper.root.logger=${ZOO_LOG4J_PROP:-INFO,CONSOLE}" \
      -XX:+HeapDumpOnOutOfMemoryError -XX:OnOutOfMemoryError='kill -9 %p' \
      -cp "$cfgdir:/usr/share/java/zookeeper.jar" ${JVMFLAGS:--Xmx512m} \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
    ;;
  version)
    exec java -cp /usr/share/java/zookeeper.jar org.apache.zookeeper.version.VersionInfoMain
    ;;
  *)
    echo "usage: zkServer.sh start-foreground [CONFIG] | version" >&2
    exit 2
    ;;
esac
