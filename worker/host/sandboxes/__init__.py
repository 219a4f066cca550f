"""Sandboxes: what runs a batch of trials, each an implementation of the `Sandbox` protocol
(gate.core.suite.sandbox).

- `docker`: `DockerSandbox`, the real one: locked-down, network-less containers on a Docker engine
- `stub`: `StubSandbox`, a test and benchmark double that runs nothing (`gate-worker serve --sandbox stub`)
"""
