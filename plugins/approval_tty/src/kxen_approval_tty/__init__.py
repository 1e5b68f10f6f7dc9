"""kxen-approval-tty: ask approval questions on the terminal.

It answers only when standard input and standard error are terminals; otherwise it passes (returns
``None``) and the next channel is asked -- with none left, kxen says no. The prompt shows the whole
request (what would run or be called, the fingerprint) and reads the answer in a worker thread, so
the event loop never blocks. Prompts are serialized: two questions never interleave.
"""
