from setuptools import setup

# Metadata and dependencies live in setup.cfg; this file exists for tools that still call it.
setup()
