"""The live transaction inspector: a web page and a JSON API served by the broker beside
``/metrics`` (same port, same switch: ``metrics.port`` > 0; ``inspector.enable`` turns it off
alone), and what feeds them.

- ``settings``: when the page is served and when its abort action is allowed;
- ``recorder``: the bounded event store behind a transaction's timeline (requests, state changes,
  markers), filled only while the page is on;
- ``views``: the JSON views read from the brokers of this process (transactions, partitions,
  groups, files, the overview), paged;
- ``hanging``: hanging transactions as ``kafka-transactions.sh find-hanging`` finds them, and
  the abort ``kafka-transactions.sh abort`` does;
- ``web``: the HTML pages (server-rendered, a little JavaScript for live refresh);
- ``http``: the routes (``/inspect/...``, ``/inspect/api/...``).

``python -m broker.inspect live --url ...`` (``broker.inspect.live_cli``) reads the JSON API.
"""
