# Sourced by .ci/run: a Docker engine for the docker half of the tests, on the host's network only.
# The machines CI runs on reach no image registry and allow loopback addresses only, so:
# - dockerd runs without its bridge (no docker0, no iptables rules, no private-range addresses);
#   every compose service says `network_mode: host`;
# - the images' base is debootstrapped from the Debian mirror this machine's apt already uses and
#   imported once (kept in the engine's store for later runs on the same machine);
# - the engine runs only for the tests and is stopped by its pid afterwards, so that other test
#   runs on the machine never see an engine they did not ask for.

DOCKER_BASE_IMAGE=reliable-kafka/debian-base:bookworm
DOCKERD_PID=

# The Debian mirror of this machine's apt sources (deb822 or one-line format), for debootstrap.
debian_mirror() {
    local mirror
    mirror=$(awk '
        /^URIs:/ { uris = $2 }
        /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") found = uris }
        /^$/ { uris = "" }
        END { print found }' /etc/apt/sources.list.d/*.sources 2>/dev/null)
    if [ -z "$mirror" ]; then
        mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null)
    fi
    printf '%s\n' "$mirror"
}

docker_start() {
    if docker info >/dev/null 2>&1; then
        echo "a Docker engine already answers; using it (not stopped at the end)"
        return
    fi
    mkdir -p /var/log
    dockerd --bridge=none --iptables=false --ip6tables=false --ip-masq=false >/var/log/reliable-kafka-dockerd.log 2>&1 &
    DOCKERD_PID=$!
    local i
    for i in $(seq 1 60); do
        docker info >/dev/null 2>&1 && return
        if ! kill -0 "$DOCKERD_PID" 2>/dev/null; then
            tail -20 /var/log/reliable-kafka-dockerd.log >&2
            echo "dockerd exited" >&2
            return 1
        fi
        sleep 0.5
    done
    echo "dockerd did not answer within 30 s" >&2
    return 1
}

# By pid, never by name: other work on the machine may run its own engine.
docker_stop() {
    [ -n "$DOCKERD_PID" ] || return 0
    kill -TERM "$DOCKERD_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 60); do
        kill -0 "$DOCKERD_PID" 2>/dev/null || break
        sleep 0.5
    done
    kill -KILL "$DOCKERD_PID" 2>/dev/null || true
    wait "$DOCKERD_PID" 2>/dev/null || true
    DOCKERD_PID=
    # dockerd may leave its host-network namespace mounted.
    if mountpoint -q /run/docker/netns/default 2>/dev/null; then
        umount /run/docker/netns/default || true
    fi
}

docker_base_image() {
    if docker image inspect "$DOCKER_BASE_IMAGE" >/dev/null 2>&1; then
        echo "$DOCKER_BASE_IMAGE: cached"
        return
    fi
    local mirror rootfs
    mirror=$(debian_mirror)
    if [ -z "$mirror" ]; then
        echo "no Debian bookworm mirror in /etc/apt/sources.list*; cannot debootstrap the image base" >&2
        return 1
    fi
    rootfs=$(mktemp -d /var/tmp/reliable-kafka-rootfs.XXXXXX)
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
    tar -C "$rootfs" -c . | docker import - "$DOCKER_BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
    echo "$DOCKER_BASE_IMAGE: debootstrapped and imported"
}

# The images of docker/*.yml, on the debootstrapped base (layers cached by the engine).
docker_build_images() {
    local file
    for file in docker/kafka-3.9.yml docker/kafka-4.yml docker/kafka-0.9.yml; do
        BASE="$DOCKER_BASE_IMAGE" docker-compose -f "$file" -p reliable-kafka-build build -q
    done
}
