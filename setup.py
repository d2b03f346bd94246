from setuptools import Extension, setup

# Metadata and dependencies live in setup.cfg. The one C extension reads and packs a partition's
# records without the GIL (reliable_kafka/kafka/client/packed_fetch.py); it is optional: without a C
# compiler the install still succeeds and the receivers pack in Python, more slowly.
setup(
    ext_modules=[
        Extension(
            "reliable_kafka.kafka.client._packed_fetch",
            ["reliable_kafka/kafka/client/_packed_fetch.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
