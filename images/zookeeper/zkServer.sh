#!/bin/sh
# `zkServer.sh start-foreground [CONFIG]` as the official image runs it: ZooKeeper in the
# foreground, logging to stdout. Debian's own zkServer.sh comes with the `zookeeper` package, which
# needs a full desktop JRE; the server itself is in libzookeeper-java, run here directly.
set -eu

case "${1:-}" in
  start-foreground)
    config="${2:-$ZOO_CONF_DIR/zoo.cfg}"
    # zookeeper.jar names its dependencies in its manifest's Class-Path (Debian's packaging);
    # /etc/zookeeper holds log4j.properties (console only: the container's log is stdout).
    # JVMFLAGS is a list of options: split on purpose
    # shellcheck disable=SC2086
    exec java ${JVMFLAGS:--Xmx512m} \
      "-Dzookeeper.log.dir=$ZOO_LOG_DIR" \
      "-Dzookeeper.root.logger=${ZOO_LOG4J_PROP:-INFO,CONSOLE}" \
      -cp /etc/zookeeper:/usr/share/java/zookeeper.jar \
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
