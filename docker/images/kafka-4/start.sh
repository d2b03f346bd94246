#!/bin/bash
# Runs the broker in the foreground; its log stays in the container, so that `docker kill` then
# `docker start` restarts it on the data it had.
set -euo pipefail
JAVA=(java -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties -Dkafka.logs.dir=/tmp/kafka-logs -cp '/opt/kafka/libs/*')
# The SECURED listener's secrets: files of the host's (reliable-kafka-local docker-context makes
# them), mounted read-only, never in the image. The store's password reaches the broker through an
# owner-only file.
SECURITY=/opt/kafka/security
SCRAM_USER=alice
umask 077
{
    cat /opt/kafka/config/server.properties
    printf 'listener.name.secured.ssl.keystore.password=%s\n' "$(cat "$SECURITY/broker-store.password")"
} >/tmp/server.properties
# KRaft storage is formatted once: a restarted container must find the metadata log it left. The
# SCRAM user goes into the metadata log then, so that it can log in from the broker's first start.
# StorageTool takes credentials on its command line only (visible in `ps` for the second it runs,
# once): acceptable for this test cluster's random password on loopback, not for production. It
# prints the stored keys, and quotes a value it refuses: its output is masked.
if [ ! -e /var/lib/kafka/meta.properties ]; then
    "${JAVA[@]}" kafka.tools.StorageTool format --cluster-id "$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22)" \
        --config /tmp/server.properties \
        --add-scram "SCRAM-SHA-512=[name=$SCRAM_USER,password=$(cat "$SECURITY/$SCRAM_USER.password")]" 2>&1 \
        | sed -e 's/^Bootstrap metadata: .*/Bootstrap metadata: (not shown: it holds the SCRAM keys)/' \
            -e 's/password=[^]]*/password=(hidden)/g'
fi
exec "${JAVA[@]}" kafka.Kafka /tmp/server.properties
