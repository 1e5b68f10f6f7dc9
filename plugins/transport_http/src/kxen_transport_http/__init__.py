"""kxen's Streamable HTTP transport (kind ``http``); see :mod:`kxen_transport_http.streamable`."""

__version__ = "0.1.0"
