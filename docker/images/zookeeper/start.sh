#!/bin/bash
# Writes zoo.cfg for ZOOKEEPER_PORT and runs ZooKeeper in the foreground (data in the container,
# so that `docker kill` then `docker start` finds the znodes again).
set -eu
mkdir -p /var/lib/zookeeper
cat > /tmp/zoo.cfg <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=/var/lib/zookeeper
clientPort=${ZOOKEEPER_PORT}
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=20000
4lw.commands.whitelist=*
admin.enableServer=false
CFG
exec java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile=/opt/zookeeper/log4j2.properties -Dzookeeper.jmx.log4j.disable=true \
    -cp '/opt/zookeeper/libs/*' org.apache.zookeeper.server.quorum.QuorumPeerMain /tmp/zoo.cfg
