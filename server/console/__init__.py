"""The built-in web console (``kafka-sidecar serve --console-port PORT``): topics, messages,
groups and lag, and the broker's activity, in a browser, served by the broker itself.

Server-rendered HTML on the broker's event loop (the small HTTP server of server/http.py), no
JavaScript, nothing fetched from elsewhere. Every page asks the broker's own API handlers what a
Kafka client would ask, as the logged-in principal (server/console/api.py), so what it shows is
what Kafka's tools show and the authorizer decides what each user sees; writes (produce,
delete records) exist only with ``--console-allow-writes`` and take the Produce and
DeleteRecords paths. Imported only when the console is on: with it off the broker loads none of
this.

Modules: ``server`` (routes, login), ``auth`` (HTTP basic over the SASL users), ``api`` (the
handler calls), ``cluster`` and ``groups`` (what the pages ask), ``records`` (the message
browser), ``writes``, one module per page (``home``, ``topic``, ``group``, ``activity``),
``sampler`` and ``charts`` (Activity's history and SVG), ``html`` (escaping, layout, style).
The entry point is ``server.ConsoleServer`` (this package imports nothing itself).
"""
