#!/bin/bash
# Runs the broker in the foreground; its log stays in the container, so that `docker kill` then
# `docker start` restarts it on the data it had.
set -eu
JAVA=(java -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties -Dkafka.logs.dir=/tmp/kafka-logs -cp '/opt/kafka/libs/*')
# KRaft storage is formatted once: a restarted container must find the metadata log it left.
if [ ! -e /var/lib/kafka/meta.properties ]; then
    "${JAVA[@]}" kafka.tools.StorageTool format --cluster-id "$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22)" \
        --config /opt/kafka/config/server.properties
fi
exec "${JAVA[@]}" kafka.Kafka /opt/kafka/config/server.properties
