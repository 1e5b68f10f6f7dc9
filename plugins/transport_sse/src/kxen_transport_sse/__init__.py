"""kxen's legacy HTTP+SSE transport (kind ``sse``); see :mod:`kxen_transport_sse.legacy`."""

__version__ = "0.1.0"
