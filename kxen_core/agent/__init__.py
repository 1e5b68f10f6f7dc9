"""What the agent sees: every output rendered as bounded text (binary as descriptors), model-safe
tool names, qualified ``<server>__<tool>`` names, a tool result checked against its ``outputSchema``.

Plain functions over plain values: it uses only the contract modules (:mod:`kxen_core.errors`).
"""
