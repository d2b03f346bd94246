#!/bin/bash
# Runs the broker in the foreground; its log stays in the container, so that `docker kill` then
# `docker start` restarts it on the data it had.
set -eu
JAVA=(java -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j.configuration=file:/opt/kafka/config/log4j.properties -Dkafka.logs.dir=/tmp/kafka-logs -cp '/opt/kafka/libs/*')
exec "${JAVA[@]}" kafka.Kafka /opt/kafka/config/server.properties
