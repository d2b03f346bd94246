#!/bin/bash
# Runs the broker in the foreground; its log stays in the container, so that `docker kill` then
# `docker start` restarts it on the data it had.
set -euo pipefail
JAVA=(java -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j.configuration=file:/opt/kafka/config/log4j.properties -Dkafka.logs.dir=/tmp/kafka-logs -cp '/opt/kafka/libs/*')
# The SECURED listener's secrets: files of the host's (reliable-kafka-local docker-context makes
# them), mounted read-only, never in the image. They reach the broker and ConfigCommand through
# owner-only files, never a command line (`ps` shows those to every user of the host).
SECURITY=/opt/kafka/security
SCRAM_USER=alice
umask 077
{
    cat /opt/kafka/config/server.properties
    printf 'listener.name.secured.ssl.keystore.password=%s\n' "$(cat "$SECURITY/broker-store.password")"
} >/tmp/server.properties
# SCRAM credentials are kept in ZooKeeper: made once, before the broker's first start, so that the
# user can log in as soon as the listener accepts connections. ConfigCommand quotes a value it
# refuses, password and all: the container's log gets it masked.
if [ ! -e /var/lib/kafka-scram-users-made ]; then
    printf 'SCRAM-SHA-512=iterations=4096,password=%s\n' "$(cat "$SECURITY/$SCRAM_USER.password")" >/tmp/scram.properties
    "${JAVA[@]}" kafka.admin.ConfigCommand --zookeeper 127.0.0.1:22181 --alter --entity-type users \
        --entity-name "$SCRAM_USER" --add-config-file /tmp/scram.properties 2>&1 \
        | sed -e 's/password=[^],]*/password=(hidden)/g'
    rm /tmp/scram.properties
    touch /var/lib/kafka-scram-users-made
fi
exec "${JAVA[@]}" kafka.Kafka /tmp/server.properties
